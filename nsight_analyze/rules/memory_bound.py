"""The `memory-bound` finding: memory-bound kernels take a large share of GPU time.

Why a module of its own: it reads two sources of one question, a measured roofline (Nsight Compute,
the CUPTI range profiler: bounded by the bandwidth headroom) or, without one, the kernel name rules'
memory category (not bounded), and its fixes follow the memory families that take the time
(`advice.memory_fixes`: elementwise, normalisation, copies, ...), 16-bit advice only where the GPU
takes it (rules/precision.gpu_support).
"""

from __future__ import annotations

import math

from ..store.query_layer import statements
from . import advice
from ._common import step_metrics
from .base import Ctx, Finding, Fix, Signal
from .declare import Cause, Doc, Threshold, finding
from .precision import gpu_support

SQL = statements("rules/memory_bound")
# memory-category GPU time by fix family (memory kernels by subcategory, memops by kind)
_MEMORY_FAMILIES = SQL.sql(
    "memory_families",
    kernel_family=advice.family_sql("category", "subcategory"),
    memop_family=advice.MEMOP_FAMILY_SQL,
)


def _nan_if_null(value: float | None) -> float:
    """A share, NaN when NULL (no memory-category time to share), as the DataFrame held it."""
    return math.nan if value is None else float(value)


def _memory_advice(ctx: Ctx) -> tuple[list[Fix], list[Signal], dict]:
    """Fixes for the memory-category time, by the families that take it (largest first)."""
    fams = ctx.rows(_MEMORY_FAMILIES) if ctx.has("kernels", "memops") else []
    # families worth a fix: the largest, and any other with >= 10 % of the memory time
    shares = {str(f["family"]): _nan_if_null(f["pct_of_memory_time"]) for f in fams}
    order = [f for i, (f, p) in enumerate(shares.items()) if i == 0 or p >= 10] or ["elementwise"]
    short_ns = int(ctx.th["short_kernel_us"] * 1000)
    med = ctx.scalar(SQL["memory_kernel_median"]) if ctx.has("kernels") else None
    short = med is not None and med < short_ns
    signals = []
    if shares:
        top = order[0]
        signals.append(
            Signal(
                "largest memory family",
                top,
                "",
                "neutral",
                ", ".join(f"{advice.FAMILY_LABEL.get(f, f)} {p:.1f} %" for f, p in shares.items())
                + " of memory-category time"
                + (
                    ": mostly host<->device copies, see the host-device-copies finding"
                    if top == "transfer"
                    else ""
                ),
            )
        )
    if med is not None:
        signals.append(
            Signal(
                "median memory kernel",
                med,
                "ns",
                "supports" if short else "neutral",
                f"shorter than {ctx.th['short_kernel_us']} us: too little work per launch to reach full "
                "bandwidth; fuse or batch"
                if short
                else "long enough to stream at bandwidth: fewer bytes (fusion, precision) is the lever",
            )
        )
    fixes = advice.memory_fixes(order, short, gpu_support(ctx))  # 16-bit advice only where the GPU takes it
    return fixes, signals, {"memory_time_by_family_pct": shares}


@finding(
    "memory-bound",
    doc=Doc(
        what="memory-bound kernels dominate (>= `memory_bound_min_pct`)",
        source=(
            "`roofline` (Nsight Compute or CUPTI range-profiler kernels with FLOPs and DRAM bytes: "
            "share of profiled time, or of launches when the export has no durations) when present, "
            "else kernel category; the memory-category time split by fix family (memory kernels by "
            "subcategory, memops by kind: metric `memory_time_by_family_pct`) picks the fixes"
        ),
        recoverable="ncu: memory time x bandwidth headroom; category: unbounded (null)",
    ),
    thresholds={
        "memory_bound_min_pct": Threshold(
            30.0, "report memory-bound kernels when they take >= this % of the GPU's busy time"
        ),
    },
    reads=("diag_windows", "kernel_summary", "roofline", "steps", "time_partition"),
    causes=(
        Cause(
            "memory-bound",
            ("memory-bound",),
            "Memory-category share of busy GPU time",
            "pct",
            magnitude="memory_pct_of_busy",
            threshold="memory_bound_min_pct",
            of_step=False,
            measure="memory_share",
        ),
    ),
)
def memory_bound(ctx: Ctx) -> list[Finding]:
    """Memory-bound kernels dominate: with Nsight Compute data, by roofline; else by category."""
    th = ctx.th["memory_bound_min_pct"]
    ncu_rows = (ctx.scalar(SQL["memory_bound_launch_count"]) or 0) if ctx.has("roofline") else 0
    if ncu_rows:
        placed = ctx.column(SQL["roofline_sources"])
        names = {"ncu": "Nsight Compute", "cupti_range": "CUPTI range profiler"}
        label = " + ".join(names.get(s, s) for s in placed)
        ev = ctx.evidence(
            f"memory-bound launches ({label})",
            "Launches below the ridge point: achieved DRAM bandwidth against the GPU's (roofline).",
            SQL["memory_bound_launches"],
        )
        share = ctx.scalar(SQL["memory_bound_share"])
        headroom = ctx.scalar(SQL["bandwidth_headroom"])
        if (share or 0) < th:
            return []
        mem_ns = ctx.scalar(SQL["worst_rank_memory_ns"]) if ctx.has("diag_windows") else None
        rec = (
            ctx.per_step(float(mem_ns or 0) * float(headroom or 0))
            if mem_ns and headroom is not None
            else None
        )
        steps = [int(s) for s in ctx.column(SQL["memory_steps"])] if rec and ctx.has_steps else []
        fixes, mix_signals, mix = _memory_advice(ctx)
        return [
            ctx.finding(
                id="memory-bound",
                title=f"Memory-bound kernels dominate ({label} roofline)",
                kind="performance",
                summary=f"{round(share, 1)} % of profiled kernel time is below the ridge point "
                f"(memory-bound).",
                ranks=[],
                steps=steps,
                recoverable_ns_per_step=rec,
                recoverable_method="memory time per step (time_partition.memory_ns, worst rank) x "
                "the profiled "
                "memory-bound launches' bandwidth headroom (1 - bytes / (peak BW x duration))",
                metrics={
                    "memory_bound_pct_of_profiled": share,
                    "bandwidth_headroom": headroom,
                    **(mix if mix["memory_time_by_family_pct"] else {}),
                    **step_metrics(ctx, steps, rec),
                },
                evidence=[ev],
                signals=[Signal("source", label, "", "supports", "measured FLOPs and DRAM bytes")]
                + mix_signals,
                fixes=fixes,
            )
        ]
    if not ctx.has("diag_windows"):
        return []
    share = ctx.scalar(SQL["memory_share_of_busy"])
    if share is None or share < th:
        return []
    ev = [
        ctx.evidence(
            "memory-category kernels",
            "Kernels the name rules classify as memory-bound, by total time over ranks (kernel_summary).",
            SQL["memory_category_kernels"],
        )
    ]
    if ctx.has("kernels", "memops"):
        ev.append(
            ctx.evidence(
                "memory-category time by fix family",
                "Memory kernels by subcategory family and copies/memsets by kind (all ranks, whole "
                "capture): the fixes follow the largest families.",
                _MEMORY_FAMILIES,
            )
        )
    fixes, mix_signals, mix = _memory_advice(ctx)
    return [
        ctx.finding(
            id="memory-bound",
            title="Memory-bound kernels take a large share of GPU time (by kernel category)",
            kind="performance",
            summary=f"{round(share, 1)} % of busy GPU time is memory-category work ("
            + (
                ", ".join(
                    f"{advice.FAMILY_LABEL.get(f, f)} {p:.0f} %"
                    for f, p in list(mix["memory_time_by_family_pct"].items())[:3]
                )
                + " of it"
                if mix["memory_time_by_family_pct"]
                else "elementwise, normalisation, copies"
            )
            + "); without per-kernel DRAM bytes (Nsight Compute, or CUPTI range-profiler dram__bytes "
            "counters) the recoverable time cannot be bounded.",
            ranks=[],
            steps=[],
            recoverable_ns_per_step=None,
            recoverable_method="not bounded: needs achieved DRAM bandwidth (ingest an Nsight Compute export, "
            "or a PyTorch-profiler trace whose range profiler recorded dram__bytes_read/write.sum)",
            metrics={"memory_pct_of_busy": share, "threshold_pct": th, **mix},
            evidence=ev,
            signals=[
                Signal(
                    "source",
                    "kernel name rules",
                    "",
                    "neutral",
                    "a name rule, not a measurement: confirm with ncu (SpeedOfLight / roofline)",
                ),
                *mix_signals,
            ],
            fixes=fixes,
        )
    ]
