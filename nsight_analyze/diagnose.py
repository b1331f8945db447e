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
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import duckdb
import pandas as pd

from .errors import UserError

SCHEMA = "nsight-analyze-diagnose/1"
SEVERITIES = ("high", "medium", "low", "info")


@dataclass(frozen=True)
class Threshold:
    """A named, documented, overridable default (units are in the name)."""

    default: float
    doc: str


# name -> default and meaning; docs/diagnose.md lists the same table (a test checks it).
THRESHOLDS: dict[str, Threshold] = {
    "severity_high_pct": Threshold(10.0, "recoverable time >= this % of the mean step: severity high"),
    "severity_medium_pct": Threshold(
        3.0, "recoverable time >= this % of the mean step: severity medium (else low)"
    ),
    "input_stall_min_pct": Threshold(
        5.0, "a step is input-stalled when its worst rank waits on the input pipeline >= this % of the step"
    ),
    "sync_stall_min_pct": Threshold(
        0.0,
        "report sync stalls when they are > this % of the mean step (nsys-flagged calls are always reported)",
    ),
    "launch_min_pct": Threshold(
        5.0,
        "a step is launch-bound when launch gaps + host-bound idle of its worst rank >= this % of the step",
    ),
    "exposed_comm_min_pct": Threshold(
        10.0, "report exposed communication when the overlap-recoverable part is >= this % of the mean step"
    ),
    "imbalance_min_pct": Threshold(
        3.0, "report load imbalance when the slowest rank's extra compute is >= this % of the mean step"
    ),
    "launch_explained_min_pct": Threshold(
        50.0,
        "launch-bound (else host-bound) when launch gaps are >= this % of the attributed launch-gap + "
        "host-bound idle (worst rank per step)",
    ),
    "short_kernel_us": Threshold(
        10.0, "kernels shorter than this (us) count as short (small work per kernel)"
    ),
    "low_occupancy_min_pct": Threshold(
        1.0,
        "report kernels with fewer blocks than SMs when their idle-SM bound is >= this % of the mean step",
    ),
    "sm_count_default": Threshold(
        0.0, "SM count to assume when the trace has none (0: skip the occupancy rule)"
    ),
    "memory_bound_min_pct": Threshold(
        30.0, "report memory-bound kernels when they take >= this % of the GPU's busy time"
    ),
    "dominant_kernel_pct": Threshold(50.0, "report a single kernel taking >= this % of all kernel time"),
    "copy_min_pct": Threshold(5.0, "report host<->device copies taking >= this % of the mean step"),
    "gpu_starv_gap_ms": Threshold(
        500.0, "GPU idle gaps longer than this (ms) are starvation (nsys gpu-starv)"
    ),
    "low_util_chunks": Threshold(30.0, "chunks the capture is cut into for utilisation (nsys gpu-low-util)"),
    "low_util_pct": Threshold(50.0, "chunks below this % in-use are low-utilisation (nsys gpu-low-util)"),
    "sync_htod_min_bytes": Threshold(
        65536.0, "synchronous HtoD copies of at most this many bytes are not flagged (nsys cuda-sync-memcpy)"
    ),
    "clock_skew_min_us": Threshold(100.0, "report clock corrections between hosts larger than this (us)"),
    "graph_min_pct": Threshold(1.0, "report CUDA-graph coverage when graphs run >= this % of kernel time"),
    "fusion_min_kernels": Threshold(
        4.0,
        "a run of at least this many consecutive memory-bound elementwise/norm kernels is a fusion candidate",
    ),
    "fusion_min_pct": Threshold(
        1.0, "report fusion candidates when they can recover >= this % of the mean step"
    ),
    "attention_min_pct": Threshold(
        1.0,
        "report unfused attention (GEMM -> softmax -> GEMM) when it can recover >= this % of the mean step",
    ),
    "precision_min_pct": Threshold(
        1.0,
        "report FP32/TF32 GEMMs when moving them to 16-bit tensor cores can recover >= this % of the "
        "mean step",
    ),
    "graph_candidate_min_kernels": Threshold(
        20.0,
        "a run of at least this many consecutive launch-bound kernels outside graphs is a CUDA-graph "
        "candidate",
    ),
    "graph_candidate_min_pct": Threshold(
        1.0, "report CUDA-graph candidates when their launch idle is >= this % of the mean step"
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


class Findings(list):
    """The ranked findings plus what they were computed with (thresholds, job shape)."""

    thresholds: dict[str, float]
    job: dict[str, Any]


# ------------------------------------------------------------------------------------------------
# Context shared by the rules


def _jsonable(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "tolist"):
        return _jsonable(value.tolist())
    if hasattr(value, "item"):
        return _jsonable(value.item())
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    if value is pd.NA or value is pd.NaT:
        return None
    return value


def rows_of(df: pd.DataFrame, limit: int | None = None) -> list[dict[str, Any]]:
    """DataFrame rows as plain JSON-able dicts (lists stay lists, NaN/NA become None)."""
    part = df if limit is None else df.head(limit)
    return [{str(k): _jsonable(v) for k, v in r.items()} for r in part.astype(object).to_dict("records")]


class Ctx:
    """Connection, thresholds and job shape, with helpers the rule modules share."""

    def __init__(self, con: duckdb.DuckDBPyConnection, th: dict[str, float]):
        self.con = con
        self.th = th
        self.objects = {
            r[0]
            for r in con.execute(
                "SELECT view_name FROM duckdb_views() UNION SELECT table_name FROM duckdb_tables() "
                "UNION SELECT function_name FROM duckdb_functions() WHERE function_type IN "
                "('table_macro', 'macro')"
            ).fetchall()
        }
        self.missing: list[str] = []
        job = (
            self.df(
                """SELECT count(DISTINCT step) AS steps, bool_or(step IS NOT NULL) AS has_steps,
                      count(DISTINCT rank) AS ranks FROM diag_windows"""
            )
            if self.has("diag_windows")
            else pd.DataFrame()
        )
        if job.empty or not job.at[0, "ranks"]:
            self.n_steps, self.has_steps, self.n_ranks, self.mean_step_ns = 0, False, 0, 0.0
        else:
            self.has_steps = bool(job.at[0, "has_steps"])
            self.n_steps = int(job.at[0, "steps"]) if self.has_steps else 1
            self.n_ranks = int(job.at[0, "ranks"])
            self.mean_step_ns = float(
                self.scalar("SELECT avg(w) FROM (SELECT max(window_ns) AS w FROM diag_windows GROUP BY step)")
                or 0.0
            )

    def has(self, *names: str) -> bool:
        ok = all(n in self.objects for n in names)
        if not ok:
            self.missing.extend(n for n in names if n not in self.objects and n not in self.missing)
        return ok

    def df(self, sql: str, params: list | None = None) -> pd.DataFrame:
        return self.con.execute(sql, params or []).df()

    def scalar(self, sql: str) -> Any:
        row = self.con.execute(sql).fetchone()
        return None if row is None else _jsonable(row[0])

    def evidence(self, name: str, description: str, sql: str) -> Evidence:
        sql = " ".join(sql.split())
        df = self.df(sql)
        rows = rows_of(df, int(self.th["evidence_rows"]))
        return Evidence(name, description, sql, [str(c) for c in df.columns], rows, int(len(df)))

    def pct(self, ns: float | None) -> float | None:
        if ns is None or not self.mean_step_ns:
            return None
        return round(100.0 * ns / self.mean_step_ns, 2)

    def severity(self, ns: float | None) -> str:
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

    def step_word(self) -> str:
        return "step" if self.has_steps else "capture (no steps found: the whole capture is one window)"


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
    return th


def _sort_key(f: Finding) -> tuple:
    capture = 0 if f.kind == "capture" else 1
    rec = -1 if f.recoverable_ns_per_step is None else f.recoverable_ns_per_step
    return (capture, -rec, SEVERITIES.index(f.severity), f.id)


def diagnose(con: duckdb.DuckDBPyConnection, thresholds: dict | None = None) -> list[Finding]:
    """Run every rule on an open workspace and return the findings ranked by recoverable time."""
    from .rules import RULES

    th = resolve_thresholds(thresholds)
    ctx = Ctx(con, th)
    found: list[Finding] = []
    errors: list[str] = []
    for rule in RULES:
        try:
            found.extend(rule(ctx))
        except Exception as exc:  # noqa: BLE001 - one broken rule or view must not hide the others
            errors.append(f"{rule.__module__.rsplit('.', 1)[-1]}.{rule.__name__}: {str(exc).splitlines()[0]}")
    from .rules.advice import annotate_memory

    annotate_memory(con, found)  # fixes that need memory say whether it fits (memory_peak)
    found.sort(key=_sort_key)
    out = Findings(found)
    for i, f in enumerate(out, 1):
        f.rank = i
    out.thresholds = th
    out.job = {
        "ranks": ctx.n_ranks,
        "steps": ctx.n_steps,
        "has_steps": ctx.has_steps,
        "mean_step_ns": int(round(ctx.mean_step_ns)),
        "missing_views": sorted(set(ctx.missing)),
        "rule_errors": errors,
    }
    return out


def finding_dict(f: Finding) -> dict[str, Any]:
    d = asdict(f)
    return _jsonable_tree(d)


def _jsonable_tree(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable_tree(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable_tree(v) for v in obj]
    return _jsonable(obj)


def findings_json(findings: list[Finding]) -> dict[str, Any]:
    """The stable JSON document (docs/diagnose.md): schema id, job, thresholds, ranked findings."""
    th = getattr(findings, "thresholds", None) or {k: v.default for k, v in THRESHOLDS.items()}
    job = getattr(findings, "job", None) or {}
    counts = {s: sum(1 for f in findings if f.severity == s) for s in SEVERITIES}
    return {
        "schema": SCHEMA,
        "job": _jsonable_tree(job),
        "thresholds": dict(th),
        "counts": counts,
        "findings": [finding_dict(f) for f in findings],
    }


RuleFn = Callable[[Ctx], list[Finding]]
