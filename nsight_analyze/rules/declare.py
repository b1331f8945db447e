"""A finding as one declared unit: what it is, which thresholds it reports at, what it reads, the
what-if scenario that bounds it and the cause compare matches it by, written once on its rule.

Why: these facts used to live in four hand-kept registries (RULES, diagnose's THRESHOLDS,
compare's CAUSES, the tables of docs/diagnose.md) and drifted. Now a rule module says them in
one `@finding(...)` above its rule; rules/__init__.py collects the declarations of every module
and derives the registries, and rules/doc_tables.py writes the docs' tables from them (a test
fails when docs/diagnose.md is stale). Adding a finding is one module (and its SQL, if it
needs new data) plus its tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

# a rule: Ctx -> list[Finding] (rules/base.py, which imports this module for Threshold)
Rule = Callable[[Any], list[Any]]


@dataclass(frozen=True)
class Threshold:
    """A named, documented, overridable default (units are in the name); `at_least`: the smallest
    value a user may set (a count the rules divide by must be at least 1)."""

    default: float
    doc: str
    at_least: float = 0.0


@dataclass(frozen=True)
class Cause:
    """What a family of findings measures, so that compare matches the same problem across runs.

    ids: the diagnose finding ids that measure it (launch-bound and host-bound are one rule's two
    readings of the same idle time, chosen by a 50 % cut-off). magnitude: `recoverable` (the
    finding's recoverable_ns_per_step) or a key of its metrics; `measure`, when set, is computed by
    compare on both runs whether or not the finding was reported (the same definition as the
    rule's), so an absent finding still has a magnitude. threshold: the diagnose threshold the
    rule reports at; `of_step` = it is a % of the mean step (magnitudes in ns per step).
    """

    key: str
    ids: tuple[str, ...]
    title: str
    unit: str  # ns_per_step | pct | ns | fraction
    magnitude: str = "recoverable"
    threshold: str | None = None
    of_step: bool = True
    measure: str | None = None


@dataclass(frozen=True)
class Doc:
    """The finding's row of docs/diagnose.md "Rules": what it finds, what it reads, and how its
    recoverable time per step is bounded."""

    what: str
    source: str
    recoverable: str


@dataclass(frozen=True)
class FindingSpec:
    """One finding as declared on its rule (docs/architecture.md "Add a finding").

    ids: the finding ids the rule emits for it; shown: the id cell of the docs' table when it is
    not the ids themselves (a family of ids such as `exposed-comm-<dim>`); thresholds: the ones
    this finding owns (a threshold is declared once, by one finding or by rules/base.py when
    every rule shares it); reads: the stored results its rule reads (computed on first read);
    whatif: the what-if scenario whose whole-job gain bounds its recoverable time
    (rules/_whatif.py); causes: how compare matches it across runs (none: its id is its cause).
    """

    ids: tuple[str, ...]
    doc: Doc
    shown: str = ""
    thresholds: Mapping[str, Threshold] = field(default_factory=dict)
    reads: tuple[str, ...] = ()
    whatif: str | None = None
    causes: tuple[Cause, ...] = ()
    rule: Rule | None = None

    @property
    def label(self) -> str:
        """The id cell of the docs' table."""
        return self.shown or " / ".join(f"`{i}`" for i in self.ids)


def finding(
    *ids: str,
    doc: Doc,
    shown: str = "",
    thresholds: Mapping[str, Threshold] | None = None,
    reads: tuple[str, ...] = (),
    whatif: str | None = None,
    causes: tuple[Cause, ...] = (),
) -> Callable[[Rule], Rule]:
    """Declare the finding(s) a rule emits (stack one per docs row when it emits several kinds).

    The rule itself is returned unchanged, carrying its declarations in `__findings__` (top
    one first); rules/__init__.py collects every declared rule and bounds it by its `whatif`.
    """

    def declare(rule: Rule) -> Rule:
        spec = FindingSpec(ids, doc, shown, dict(thresholds or {}), tuple(reads), whatif, tuple(causes), rule)
        rule.__findings__ = (spec, *getattr(rule, "__findings__", ()))  # type: ignore[attr-defined]
        return rule

    return declare


__all__ = ["Cause", "Doc", "FindingSpec", "Rule", "Threshold", "finding"]
