"""GPU starvation and low-utilisation windows, with Nsight Systems' own definitions (parity).

The evidence lists the same gaps and chunks `nsys analyze` (2022.4: gpu-starv, gpu-low-util)
reports, so the findings can be checked against NVIDIA's output event by event.
"""

from __future__ import annotations

from ..store.query_layer import statements
from ._common import step_metrics
from .base import Ctx, Finding, Fix, Signal
from .declare import Cause, Doc, Threshold, finding

SQL = statements("rules/nsys")


def _overlapping(a: str, b: str) -> str:
    """The join condition "same rank, overlapping in time" of aliases `a` and `b`, as the
    inequality join queries/timeline/_rank_time.sql explains (a hash join on the rank tries every pair)."""
    return SQL.sql("overlapping", a=a, b=b)


def _clipped_per_step(ctx: Ctx, intervals_sql: str, weight: str = "1.0") -> int:
    """Worst rank's total overlap of the intervals with its diag windows, per step."""
    if not ctx.has("diag_window_bounds"):
        return 0
    v = ctx.scalar(
        SQL.sql("worst_rank_clipped", weight=weight, intervals=intervals_sql, overlap=_overlapping("i", "w"))
    )
    return ctx.per_step(float(v or 0))


def _ranks_of(ctx: Ctx, intervals_sql: str) -> list[int]:
    """Every rank with an interval (not only those of the evidence rows kept)."""
    return [int(r) for r in ctx.column(SQL.sql("interval_ranks", intervals=intervals_sql))]


def _steps_overlapping(ctx: Ctx, intervals_sql: str) -> list[int]:
    if not ctx.has_steps or not ctx.has("diag_window_bounds"):
        return []
    return [
        int(s)
        for s in ctx.column(
            SQL.sql("overlapping_steps", intervals=intervals_sql, overlap=_overlapping("i", "w"))
        )
    ]


_CAUSE_PREFIX = "idle cause in "
_FINDING_OF_CAUSE = {
    "input_stall": "input-stall",
    "sync_stall": "excessive-sync",
    "launch_gap": "launch-bound / host-bound",
    "host_bound": "launch-bound / host-bound",
    "idle_other": "none (GPU waited on a dependency)",
}


def _cause_mix(ctx: Ctx, intervals_sql: str, where: str, chunked: bool = False) -> list[Signal]:
    """What the idle time inside the intervals was, by cause (gaps view, whole-capture pieces).

    Why: starvation and low utilisation are symptoms; the idle causes say which finding explains them.
    `chunked`: the intervals are runs of whole chunks of the stored 30-chunk grid, so the stored
    per-chunk causes (diag_util_chunk_causes) add up to the same mix.
    """
    if chunked and ctx.has("diag_util_chunk_causes"):
        sql = SQL.sql("chunk_cause_mix", intervals=intervals_sql)
    elif ctx.has("gaps"):
        sql = SQL.sql("gap_cause_mix", intervals=intervals_sql, overlap=_overlapping("g", "s"))
    else:
        return []
    return [
        Signal(
            f"{_CAUSE_PREFIX}{where}: {cause}",
            int(ns),
            "ns (all ranks)",
            "supports" if cause != "idle_other" else "neutral",
            f"explained by finding: {_FINDING_OF_CAUSE.get(cause, cause)} (gaps view)",
        )
        for cause, ns in ((r["cause"], r["ns"]) for r in ctx.rows(sql))
    ]


_FIX_OF_CAUSE = {
    "input_stall": "more DataLoader workers / prefetch, pinned memory (input-stall finding)",
    "sync_stall": "remove synchronising calls from the step (excessive-sync finding)",
    "launch_gap": "fewer, larger launches: CUDA graphs, fusion (launch-bound finding)",
    "host_bound": "move host work off the critical path: profile the host in these gaps (host-bound finding)",
    "idle_other": "the GPU waited on a dependency (stream/event waits, peers in a collective): look at "
    "exposed communication and load imbalance",
}


def _largest_cause_fix(signals: list[Signal]) -> list[Fix]:
    """A first fix aimed at the largest idle cause (signals of _cause_mix, largest first)."""
    causes = [s for s in signals if s.name.startswith(_CAUSE_PREFIX)]
    if not causes:
        return []
    top = causes[0]
    cause = top.name.rsplit(": ", 1)[-1]
    total = sum(int(s.value) for s in causes) or 1
    return [
        Fix(
            f"Start with the largest idle cause here, {cause} ({100.0 * int(top.value) / total:.0f} % of the "
            f"idle time): {_FIX_OF_CAUSE.get(cause, 'see time_partition / gaps')}",
            "the trade-offs of that finding's fixes",
        )
    ]


def _steady_only(ctx: Ctx, src: str) -> str:
    """The intervals of `src` (rank, start_ns, end_ns) less those that one-time phases
    (capture_phases: graph capture and instantiation, torch.compile compilation) span half of.

    Why: a 2 s compilation or a graph capture idles the GPU once; read as steady state it is a
    starvation gap or a low-utilisation window whose advice (find the host work, CUDA graphs) is
    the start-up being done. Phases of different kinds may overlap (a capture inside a compile
    range); their overlaps are summed, so such a window counts as covered a little early.
    """
    if not ctx.has("capture_phases"):
        return src
    return SQL.sql("steady_only", src=src)


@finding(
    "gpu-starvation",
    doc=Doc(
        what="gaps > `gpu_starv_gap_ms` (nsys gpu-starv parity)",
        source="`diag_gpu_starvation()` (over the stored gaps > 1 ms, `diag_gpu_idle_gaps`), `gaps`",
        recoverable="worst rank's gap time inside the step windows",
    ),
    thresholds={
        "gpu_starv_gap_ms": Threshold(
            500.0, "GPU idle gaps longer than this (ms) are starvation (nsys gpu-starv)"
        ),
    },
    reads=("diag_gpu_starvation", "gaps", "steps"),
    causes=(
        Cause(
            "gpu-starvation",
            ("gpu-starvation",),
            "Long GPU idle gaps (starvation)",
            "ns_per_step",
        ),
    ),
)
def gpu_starvation(ctx: Ctx) -> list[Finding]:
    """Idle gaps longer than gpu_starv_gap_ms between GPU operations (nsys gpu-starv)."""
    if not ctx.has("diag_gpu_starvation"):
        return []
    gap_ms = ctx.th["gpu_starv_gap_ms"]
    src = _steady_only(ctx, SQL.sql("starvation_gaps", gap_ms=gap_ms))
    ev = ctx.evidence(
        "gpu-starv",
        f"GPU idle gaps longer than {gap_ms:g} ms per rank and device, longest first (nsys gpu-starv).",
        SQL.sql("starvation_evidence", src=src),
    )
    if not ev.total_rows:
        return []
    rec = _clipped_per_step(ctx, src)
    ranks = _ranks_of(ctx, src)
    signals = _cause_mix(ctx, src, "the gaps")
    steps = _steps_overlapping(ctx, src)
    return [
        ctx.finding(
            id="gpu-starvation",
            title=f"GPU starvation: idle gaps longer than {gap_ms:g} ms",
            kind="performance",
            summary=f"{ev.total_rows} idle gap(s) longer than {gap_ms:g} ms; inside the analysed "
            f"{'steps' if ctx.has_steps else 'capture'} they cost {rec / 1e6:.3f} ms per step.",
            ranks=ranks,
            steps=steps,
            recoverable_ns_per_step=rec,
            recoverable_method="worst rank's gap time inside the step windows (or the capture) / steps; gaps "
            "outside them (warm-up, shutdown) are listed but not counted",
            metrics={"gaps": ev.total_rows, "gap_threshold_ms": gap_ms, **step_metrics(ctx, steps, rec)},
            evidence=[ev],
            signals=signals,
            fixes=_largest_cause_fix(signals)
            + [
                Fix(
                    "Find what the host does in the gaps (CPU sampling / OS runtime trace in nsys): "
                    "checkpointing, "
                    "evaluation, compilation, data loading",
                    "tracing more adds profiler overhead",
                ),
                Fix(
                    "Make checkpointing/evaluation asynchronous or less frequent",
                    "more memory; staler checkpoints",
                ),
                Fix(
                    "Trim warm-up from the capture (nsys --capture-range=cudaProfilerApi / NVTX)",
                    "fewer steps in the profile",
                ),
            ],
        )
    ]


@finding(
    "gpu-low-utilisation",
    doc=Doc(
        what="`low_util_chunks` chunks below `low_util_pct` (nsys gpu-low-util parity)",
        source=(
            "`diag_low_util()` (over the stored 30-chunk grid `diag_util_chunks`; idle causes per "
            "chunk: `diag_util_chunk_causes`)"
        ),
        recoverable="worst rank's (1 - in-use) x overlap with the step windows",
    ),
    thresholds={
        "low_util_chunks": Threshold(
            30.0, "chunks the capture is cut into for utilisation (nsys gpu-low-util)", at_least=1.0
        ),
        "low_util_pct": Threshold(50.0, "chunks below this % in-use are low-utilisation (nsys gpu-low-util)"),
    },
    reads=("diag_low_util", "diag_util_chunk_causes", "gaps", "steps", "time_partition"),
    causes=(
        Cause(
            "gpu-low-utilisation",
            ("gpu-low-utilisation",),
            "Low GPU utilisation windows",
            "ns_per_step",
        ),
    ),
)
def low_utilisation(ctx: Ctx) -> list[Finding]:
    """Chunks of the capture with GPU time-utilisation below low_util_pct (nsys gpu-low-util)."""
    if not ctx.has("diag_low_util"):
        return []
    chunks, pct = int(ctx.th["low_util_chunks"]), ctx.th["low_util_pct"]
    src = _steady_only(ctx, SQL.sql("low_util_windows", chunks=chunks, pct=pct))
    ev = ctx.evidence(
        "gpu-low-util",
        f"Runs of the {chunks} equal chunks of each rank's GPU span with in-use "
        f"below {pct:g} % (a sum of op times, as nsys gpu-low-util).",
        SQL.sql("low_util_evidence", src=src),
    )
    if not ev.total_rows:
        return []
    rec = _clipped_per_step(ctx, src, "greatest(1.0 - i.in_use_pct / 100.0, 0)")
    ranks = _ranks_of(ctx, src)
    low = ctx.row(SQL.sql("low_util_totals", src=src))
    steps = _steps_overlapping(ctx, src)
    mix = _cause_mix(ctx, src, "the low-utilisation windows", chunked=chunks == 30)
    return [
        ctx.finding(
            id="gpu-low-utilisation",
            title=f"Low GPU utilisation windows (< {pct:g} % in-use)",
            kind="performance",
            summary=f"{ev.total_rows} window(s) of the capture run the GPU below {pct:g} % (lowest "
            f"{low['m']} %); inside the analysed windows that is {rec / 1e6:.3f} ms idle per step.",
            ranks=ranks,
            steps=steps,
            recoverable_ns_per_step=rec,
            recoverable_method="worst rank's (1 - in_use) x window overlap with the step windows / "
            "steps; overlaps "
            "the starvation and idle findings (never add them)",
            metrics={
                "windows": ev.total_rows,
                "low_util_ns_total": int(low["d"] or 0),
                "chunks": chunks,
                "threshold_pct": pct,
                **step_metrics(ctx, steps, rec),
            },
            evidence=[ev],
            signals=mix
            + [
                Signal(
                    "utilisation definition",
                    "sum of op time / chunk",
                    "",
                    "neutral",
                    "time utilisation, not SM utilisation: a busy GPU can still be inefficient",
                )
            ],
            fixes=_largest_cause_fix(mix)
            + [
                Fix(
                    "Look at the idle causes of these windows (time_partition / gaps) and fix the largest",
                    "none by itself",
                ),
                Fix(
                    "Overlap host work with GPU work (asynchronous data loading, CUDA graphs)",
                    "more host memory / static shapes",
                ),
            ],
        )
    ]
