"""What every rule is built from: the finding types, the context a rule reads, and the rule type.

Why a module of its own: the rules and `diagnose` both need these types; keeping them here lets
`diagnose` import the rules at the top (rules/__init__.py lists them, RULES) while no rule imports
`diagnose`, so there is no import cycle.

A rule is a function `Ctx -> list[Finding]` that reads stored tables through `Ctx` and builds its
findings with `Ctx.finding`, which derives the severity and the recoverable share of the mean
step from the recoverable time (docs/diagnose.md "Ranking, severity"): one place, not one copy per rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import duckdb

from ..plain import jsonable
from ..store.duck import plain_records, plain_rows
from ..store.query_layer import statements
from .declare import Threshold

SQL = statements("rules/base")

SEVERITIES = ("high", "medium", "low", "info")

# The thresholds every rule shares (severity, evidence size, what a short kernel is); each
# finding declares its own beside its rule (rules/declare.py).
SHARED_THRESHOLDS = {
    "severity_high_pct": Threshold(10.0, "recoverable time >= this % of the mean step: severity high"),
    "severity_medium_pct": Threshold(
        3.0, "recoverable time >= this % of the mean step: severity medium (else low)"
    ),
    "short_kernel_us": Threshold(
        10.0, "kernels shorter than this (us) count as short (small work per kernel)"
    ),
    "evidence_rows": Threshold(100.0, "rows kept per evidence table (nsys prints 50 per rule)"),
}


@dataclass
class Evidence:
    """A table that backs a finding, with the SQL that produced it (re-runnable as is)."""

    name: str
    description: str
    sql: str
    columns: list[str]
    rows: list[dict[str, Any]]
    total_rows: int


@dataclass
class Signal:
    """A correlated measurement that was checked, and whether it supports the diagnosis."""

    name: str
    value: Any
    unit: str
    verdict: str  # supports | against | neutral
    note: str


@dataclass
class Fix:
    """A change that can recover the finding's time, and what it costs."""

    action: str
    trade_off: str


@dataclass
class Finding:
    """One diagnosed problem (or capture caveat), ranked by the time a fix could recover."""

    id: str
    title: str
    kind: str  # capture | performance
    severity: str  # high | medium | low | info
    summary: str
    ranks: list[int]
    steps: list[int]
    recoverable_ns_per_step: int | None  # upper bound per step; None = cannot be bounded from the data
    recoverable_pct: float | None  # of the mean step time
    recoverable_method: str
    metrics: dict[str, Any] = field(default_factory=dict)
    evidence: list[Evidence] = field(default_factory=list)
    signals: list[Signal] = field(default_factory=list)
    fixes: list[Fix] = field(default_factory=list)
    rank: int = 0  # position in the ranked list (1 = first)


def evidence_rows(
    con: duckdb.DuckDBPyConnection, sql: str, limit: int
) -> tuple[list[str], list[dict[str, Any]], int]:
    """(columns, the first `limit` rows as JSON data, the row count) of `sql`. Only a result
    longer than `limit` is counted again, by `count(*)` over the query (DuckDB drops its sort
    and unused columns there): turning the rest into Python rows to count them took 3.4 s for
    a million rows, five times what a DataFrame of them did."""
    names, head, _ = plain_rows(con, sql, limit + 1)
    total = len(head)
    if total > limit:
        total = int(con.execute(SQL.sql("row_count", sql=sql)).fetchone()[0])
    return names, [{n: jsonable(v) for n, v in zip(names, r, strict=True)} for r in head[:limit]], total


def mean(values: Iterable[float | None]) -> float:
    """The mean of the values that are not None (NaN when there is none), correctly rounded
    (math.fsum) as a DataFrame column's mean skipped its missing values."""
    kept = [float(v) for v in values if v is not None]
    return math.fsum(kept) / len(kept) if kept else math.nan


class Ctx:
    """Connection, thresholds and job shape, with helpers the rule modules share."""

    def __init__(self, con: duckdb.DuckDBPyConnection, th: dict[str, float]):
        self.con = con
        self.th = th
        self.objects = {r[0] for r in con.execute(SQL["objects"]).fetchall()}
        self.missing: list[str] = []
        job = self.row(SQL["job_shape"]) if self.has("diag_windows") else {}
        if not job.get("ranks"):
            self.n_steps, self.has_steps, self.n_ranks, self.mean_step_ns = 0, False, 0, 0.0
        else:
            self.has_steps = bool(job["has_steps"])
            self.n_steps = int(job["steps"]) if self.has_steps else 1
            self.n_ranks = int(job["ranks"])
            self.mean_step_ns = float(self.scalar(SQL["mean_step"]) or 0.0)

    @property
    def in_steps(self) -> str:
        """The SQL condition on a `step` column that keeps the windows a finding counts: the steps,
        or, in a job without steps, the whole capture (its one window, step NULL)."""
        return "step IS NOT NULL" if self.has_steps else "step IS NULL"

    def has(self, *names: str) -> bool:
        """Whether every named view/table/macro exists (the missing ones are recorded for the job)."""
        ok = all(n in self.objects for n in names)
        if not ok:
            self.missing.extend(n for n in names if n not in self.objects and n not in self.missing)
        return ok

    def rows(self, sql: str) -> list[dict[str, Any]]:
        """The rows of `sql` as dicts of plain values (duck.plain_rows: NULL is None, DECIMAL and
        HUGEINT are floats). Why not a DataFrame: importing pandas was a third of `diagnose`."""
        return plain_records(self.con, sql)

    def row(self, sql: str) -> dict[str, Any]:
        """The first row of `sql` (an aggregate's one row), {} when it has none."""
        rows = self.rows(sql)
        return rows[0] if rows else {}

    def column(self, sql: str) -> list[Any]:
        """The first column of `sql`, in its order."""
        return [r[0] for r in plain_rows(self.con, sql)[1]]

    def scalar(self, sql: str) -> Any:
        row = self.con.execute(sql).fetchone()
        return None if row is None else jsonable(row[0])

    def evidence(self, name: str, description: str, sql: str) -> Evidence:
        """The first `evidence_rows` rows of `sql` (whitespace folded, re-runnable) and its row count."""
        sql = " ".join(sql.split())
        names, rows, total = evidence_rows(self.con, sql, int(self.th["evidence_rows"]))
        return Evidence(name, description, sql, names, rows, total)

    def pct(self, ns: float | None) -> float | None:
        """`ns` as a % of the mean step (2 decimals); None when not bounded or no step length."""
        if ns is None or not self.mean_step_ns:
            return None
        return round(100.0 * ns / self.mean_step_ns, 2)

    def severity(self, ns: float | None) -> str:
        """high / medium / low by the share of the mean step (severity_*_pct); info when unbounded."""
        p = self.pct(ns)
        if p is None or p <= 0:
            return "info"
        if p >= self.th["severity_high_pct"]:
            return "high"
        if p >= self.th["severity_medium_pct"]:
            return "medium"
        return "low"

    def per_step(self, total_ns: float) -> int:
        return int(round(total_ns / self.n_steps)) if self.n_steps else 0

    def finding(
        self,
        *,
        id: str,  # noqa: A002 - the Finding field's name
        title: str,
        kind: str,
        summary: str,
        ranks: list[int],
        steps: list[int],
        recoverable_ns_per_step: int | None,
        recoverable_method: str,
        severity: str | None = None,
        **rest: Any,
    ) -> Finding:
        """A Finding whose severity and recoverable_pct follow from its recoverable time.

        Why here: every rule ranks its finding the same way (`severity`, `pct` of the mean step);
        only a capture caveat with no recoverable time may state its own severity.
        """
        rec = recoverable_ns_per_step
        return Finding(
            id=id,
            title=title,
            kind=kind,
            severity=severity or self.severity(rec),
            summary=summary,
            ranks=ranks,
            steps=steps,
            recoverable_ns_per_step=rec,
            recoverable_pct=self.pct(rec),
            recoverable_method=recoverable_method,
            **rest,
        )

    def set_recoverable(self, f: Finding, ns: int | None) -> Finding:
        """Change a finding's recoverable time (e.g. bounded by the what-if replay); its share and
        severity follow, derived as in `finding`."""
        f.recoverable_ns_per_step = ns
        f.recoverable_pct = self.pct(ns)
        f.severity = self.severity(ns)
        return f


Rule = Callable[[Ctx], list[Finding]]


def rule_name(rule: Rule) -> str:
    """module.function of a rule, as rule errors name it."""
    return f"{rule.__module__.rsplit('.', 1)[-1]}.{rule.__name__}"


def run_rules(ctx: Ctx, rules: list[Rule]) -> tuple[list[Finding], list[str]]:
    """Every rule's findings, and one line per rule that failed (the others still run)."""
    found: list[Finding] = []
    errors: list[str] = []
    for rule in rules:
        try:
            found.extend(rule(ctx))
        except Exception as exc:  # noqa: BLE001 - one broken rule or view must not hide the others
            errors.append(f"{rule_name(rule)}: {str(exc).splitlines()[0]}")
    return found, errors
