"""Diagnosis rules, one module per finding (named after it; a family's shared helpers in `_private`
modules beside them: `_idle`, `_window_steps`, `_gemm_ops`, `_common`, `_whatif`; what precisions
a GPU takes in `precision`; the one list of communication fixes in `comm_families`).

Each rule takes a `base.Ctx` and returns findings (`base.Rule`), and declares above itself, with
`@finding(...)` (rules/declare.py), what it finds: its ids, thresholds, what it reads, its what-if
bound, the cause compare matches it by and its row of docs/diagnose.md. This module collects
those declarations from every module of the package and derives what used to be kept by hand:

- SPECS: every declaration, by id; RULES: the rules `diagnose()` runs (bounded by their `whatif`);
- THRESHOLDS: the shared ones (base.SHARED_THRESHOLDS) and each finding's, each declared once;
- READS: the stored results the rules read (computed on first read);
- CAUSES: how compare matches findings across runs.

The order of RULES does not matter: `diagnose()` ranks the findings by recoverable time.
"""

from __future__ import annotations

import importlib
import pkgutil

from .. import whatif
from ._whatif import bounded_by
from .base import SHARED_THRESHOLDS
from .declare import Cause, FindingSpec, Rule, Threshold

# What the shared helpers read (_idle, _common, _window_steps, _gemm_ops, advice, comm_families,
# op_roofline, precision, base), beside each finding's own `reads`.
SHARED_READS = (
    "capture_idle", "collectives", "comm_ops", "diag_comm_exposure", "diag_step_causes", "diag_windows",
    "gaps", "imbalance", "kernel_summary", "memory_peak", "op_flops", "roofline", "steps", "time_partition",
)  # fmt: skip


def _declared_rules() -> list[Rule]:
    """Every rule of this package's modules that carries `@finding` declarations, module by module
    (alphabetical), in the order the module defines them."""
    rules: list[Rule] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.name in ("base", "declare", "doc_tables"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        rules += [v for v in vars(module).values() if getattr(v, "__findings__", None) and v not in rules]
    return rules


def _bounded(rule: Rule) -> Rule:
    """The rule as diagnose runs it: bounded by its what-if scenario when one is declared."""
    scenarios = {s.whatif for s in rule.__findings__ if s.whatif}  # type: ignore[attr-defined]
    if len(scenarios) > 1:
        raise RuntimeError(f"{rule.__qualname__} declares several what-if bounds: {sorted(scenarios)}")
    return bounded_by(scenarios.pop())(rule) if scenarios else rule


def _thresholds(specs: tuple[FindingSpec, ...]) -> dict[str, Threshold]:
    out = dict(SHARED_THRESHOLDS)
    for spec in specs:
        for name, t in spec.thresholds.items():
            if name in out:
                raise RuntimeError(f"threshold {name} is declared twice (one home: rules/declare.py)")
            out[name] = t
    return out


_RULES = _declared_rules()
SPECS: tuple[FindingSpec, ...] = tuple(
    sorted((s for r in _RULES for s in r.__findings__), key=lambda s: s.ids[0])  # type: ignore[attr-defined]
)
RULES: list[Rule] = [_bounded(r) for r in _RULES]
THRESHOLDS: dict[str, Threshold] = _thresholds(SPECS)
READS: tuple[str, ...] = tuple(
    dict.fromkeys(
        [*SHARED_READS, *(n for s in SPECS for n in s.reads)]
        + (list(whatif.READS) if any(s.whatif for s in SPECS) else [])
    )
)
CAUSES: tuple[Cause, ...] = tuple(c for s in SPECS for c in s.causes)

__all__ = ["CAUSES", "READS", "RULES", "SPECS", "THRESHOLDS"]
