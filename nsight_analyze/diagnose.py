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

from . import mfu, whatif
from .classify import UNCLASSIFIED_WARN_PCT
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


@dataclass(frozen=True)
class Threshold:
    """A named, documented, overridable default (units are in the name)."""

    default: float
    doc: str


# name -> default and meaning; docs/diagnose.md lists the same table (a test checks it).
# What the rules read (their SQL names these; the efficiency rule reads the MFU document, the
# straggler rules the what-if): computed on first read (analysis.refresh), nothing more.
# tests/test_lazy_analysis.py checks it covers every name the rules' sources mention.
READS = (
    "alignment_quality", "api_summary", "attention_scores", "capture_idle", "capture_phases", "collectives",
    "comm_groups", "comm_ops", "diag_comm_dimension", "diag_comm_exposure", "diag_comm_recoverable",
    "diag_gpu_starvation", "diag_kernel_grids", "diag_low_util", "diag_rank_kernels", "diag_step_causes",
    "diag_sync_api_calls", "diag_sync_copies", "diag_util_chunk_causes", "diag_window_bounds", "diag_windows",
    "gaps", "graph_candidates", "graph_coverage", "imbalance", "kernel_chains", "kernel_summary",
    "memory_peak", "merge_straggler_verdict", "op_flops", "rank_attribution", "rank_rollup", "roofline",
    "steps", "sync_calls", "time_partition", "tp_step_ops", *whatif.READS, *mfu.READS,
)  # fmt: skip

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
    "dimension_comm_min_pct": Threshold(
        3.0,
        "with exposed-comm reported in a job of several parallelism dimensions: report a dimension when "
        "its overlap-recoverable part is >= this % of the mean step",
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
    "unclassified_max_pct": Threshold(
        UNCLASSIFIED_WARN_PCT,
        "note when more than this % of kernel time is unclassified (category other): the partition's "
        "compute/memory split is then uncertain",
    ),
    "unaligned_gemm_min_pct": Threshold(
        10.0,
        "report GEMM kernels built for operands aligned to < 16 bytes (CUTLASS align1/align2) when they "
        "take >= this % of GEMM time",
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


AT_LEAST_ONE = frozenset({"low_util_chunks"})  # thresholds the rules divide by


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
        if not math.isfinite(th[name]) or th[name] < (1 if name in AT_LEAST_ONE else 0):
            least = "1 (a count)" if name in AT_LEAST_ONE else "0"
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
