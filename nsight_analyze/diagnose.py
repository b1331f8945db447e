"""Ranked findings: what slows the job, the evidence, the time a fix could recover, and the fix.

Why a library (and not just a CLI): the terminal, JSON (CI) and HTML report all render the same
`diagnose()` result, so a finding means one thing everywhere.

Every rule is SQL over the workspace views (`queries/diag_*.sql`, `time_partition`, `imbalance`,
...); Python only loops over the rules and their few result rows. Each finding carries the SQL of
its evidence (thresholds substituted), so a user can re-run it with `nsight-analyze sql`.

Recoverable time is an upper bound per training step (docs/diagnose.md "Recoverable time"):
findings are ranked by it, not by rule order. Capture findings (clock alignment, CUDA-graph
coverage), which change how every other number must be read, come first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypedDict, overload

import duckdb

from . import rules
from .errors import UserError
from .rules import RULES
from .rules.advice import annotate_memory
from .rules.base import SEVERITIES, Ctx, Evidence, Finding, Fix, Signal, jsonable, run_rules

__all__ = [
    "SCHEMA",
    "SEVERITIES",
    "THRESHOLDS",
    "Ctx",
    "Diagnosis",
    "Evidence",
    "Finding",
    "Fix",
    "JobShape",
    "Signal",
    "diagnose",
    "finding_dict",
    "findings_json",
    "resolve_thresholds",
]

SCHEMA = "nsight-analyze-diagnose/1"


# name -> default and meaning, and what the rules read: derived from the findings' declarations
# (rules/declare.py, collected by rules/__init__.py); docs/diagnose.md's tables are written from
# them (rules/doc_tables.py; a test fails when they are stale).
THRESHOLDS = rules.THRESHOLDS
READS = rules.READS


class JobShape(TypedDict):
    """The job the findings were computed for, and what the rules could not read."""

    ranks: int
    steps: int
    has_steps: bool
    mean_step_ns: int
    missing_views: list[str]
    rule_errors: list[str]  # "module.rule: first line of the error", one per failed rule


@dataclass
class Diagnosis(Sequence[Finding]):
    """The ranked findings plus what they were computed with (thresholds, job shape).

    A sequence of its findings (iterate, index, len), so callers that only rank or render findings
    need not know the rest.
    """

    findings: list[Finding]
    thresholds: dict[str, float]
    job: JobShape

    @overload
    def __getitem__(self, i: int) -> Finding: ...
    @overload
    def __getitem__(self, i: slice) -> list[Finding]: ...
    def __getitem__(self, i: int | slice) -> Finding | list[Finding]:
        return self.findings[i]

    def __len__(self) -> int:
        return len(self.findings)


# ------------------------------------------------------------------------------------------------
# Public API


def resolve_thresholds(overrides: dict[str, Any] | None) -> dict[str, float]:
    """Defaults updated by the user's NAME=VALUE overrides; unknown names are a user error."""
    th = {k: v.default for k, v in THRESHOLDS.items()}
    for name, value in (overrides or {}).items():
        if name not in THRESHOLDS:
            raise UserError(f"unknown threshold {name!r}; known: {', '.join(sorted(THRESHOLDS))}")
        try:
            th[name] = float(value)
        except (TypeError, ValueError):
            raise UserError(f"threshold {name}={value!r} is not a number") from None
        # the rules put thresholds into SQL: NaN read as a column name, 0 chunks divided by zero
        floor = THRESHOLDS[name].at_least
        if not math.isfinite(th[name]) or th[name] < floor:
            least = "1 (a count)" if floor == 1 else f"{floor:g}"
            raise UserError(f"threshold {name}={value!r} must be a finite number of at least {least}")
    return th


def _sort_key(f: Finding) -> tuple:
    capture = 0 if f.kind == "capture" else 1
    rec = -1 if f.recoverable_ns_per_step is None else f.recoverable_ns_per_step
    return (capture, -rec, SEVERITIES.index(f.severity), f.id)


def diagnose(con: duckdb.DuckDBPyConnection, thresholds: dict | None = None) -> Diagnosis:
    """Run every rule on an open workspace and return the findings ranked by recoverable time."""
    th = resolve_thresholds(thresholds)
    ctx = Ctx(con, th)
    found, errors = run_rules(ctx, RULES)
    annotate_memory(con, found)  # fixes that need memory say whether it fits (memory_peak)
    found.sort(key=_sort_key)
    for i, f in enumerate(found, 1):
        f.rank = i
    job = JobShape(
        ranks=ctx.n_ranks,
        steps=ctx.n_steps,
        has_steps=ctx.has_steps,
        mean_step_ns=int(round(ctx.mean_step_ns)),
        missing_views=sorted(set(ctx.missing)),
        rule_errors=errors,
    )
    return Diagnosis(found, th, job)


def finding_dict(f: Finding) -> dict[str, Any]:
    """One finding as JSON data (docs/diagnose.md), evidence rows and metrics included."""
    return _jsonable_tree(asdict(f))


def _jsonable_tree(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable_tree(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable_tree(v) for v in obj]
    return jsonable(obj)


def findings_json(result: Diagnosis) -> dict[str, Any]:
    """The stable JSON document (docs/diagnose.md): schema id, job, thresholds, ranked findings."""
    counts = {s: sum(1 for f in result if f.severity == s) for s in SEVERITIES}
    return {
        "schema": SCHEMA,
        "job": _jsonable_tree(dict(result.job)),
        "thresholds": dict(result.thresholds),
        "counts": counts,
        "findings": [finding_dict(f) for f in result],
    }
