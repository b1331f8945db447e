"""The `host-device-copies` finding: HtoD/DtoH copies take a large share of the step.

Why a module of its own: its bound is the time with a copy in flight (the union over streams)
inside the step windows, and its signals (pageable copies, bytes per copy, achieved bandwidth) and
fixes (pinned memory, batching, overlap: advice's transfer family) are about copies alone.
"""

from __future__ import annotations

from ..store.query_layer import statements
from . import advice
from ._common import step_metrics
from ._window_steps import steps_of
from .base import Ctx, Finding, Fix, Signal
from .declare import Cause, Doc, Threshold, finding

SQL = statements("rules/host_device_copies")


@finding(
    "host-device-copies",
    doc=Doc(
        what="heavy HtoD/DtoH traffic",
        source="`memops` in the step windows",
        recoverable=(
            "worst rank's time with a copy in flight (union over streams, clipped to the window; upper "
            "bound: fully overlapped); steps listed when >= `copy_min_pct` of the step"
        ),
    ),
    thresholds={
        "copy_min_pct": Threshold(5.0, "report host<->device copies taking >= this % of the mean step"),
    },
    reads=("diag_window_bounds", "steps"),
    causes=(
        Cause(
            "host-device-copies",
            ("host-device-copies",),
            "Host<->device copies",
            "ns_per_step",
            threshold="copy_min_pct",
        ),
    ),
)
def host_device_copies(ctx: Ctx) -> list[Finding]:
    """Host<->device copies take a large share of the step (bytes, pageable memory, bandwidth)."""
    if not ctx.has("diag_window_bounds"):
        return []
    th = ctx.th["copy_min_pct"]
    base = SQL["copies_in_windows"]
    per_window = SQL["copy_time_per_window"]
    per_rank = ctx.rows(SQL.sql("copy_time_per_rank", per_window=per_window))
    if not per_rank:
        return []
    total = float(max(r["t"] for r in per_rank))
    rec = ctx.per_step(total)
    if (ctx.pct(rec) or 0) < th:
        return []
    ev = [
        ctx.evidence(
            "host-device copies",
            "HtoD/DtoH copies inside the step windows: count, bytes, time, achieved bandwidth, "
            "pageable share.",
            SQL.sql("copies_per_rank_kind", copies=base),
        )
    ]
    stats = ctx.row(SQL.sql("copy_stats", copies=base))
    n, avg_b, pageable, gbps = (stats[c] for c in ("n", "avg_b", "pageable", "gbps"))
    ranks = [
        r["rank"] for r in per_rank if 100.0 * r["t"] / max(ctx.n_steps, 1) / max(ctx.mean_step_ns, 1) >= th
    ]
    steps = steps_of(ctx, per_window, th)
    return [
        ctx.finding(
            id="host-device-copies",
            title="Heavy host<->device copy traffic",
            kind="performance",
            summary=f"HtoD/DtoH copies take {rec / 1e6:.3f} ms per step ({ctx.pct(rec)} % of the mean step).",
            ranks=sorted(int(r) for r in ranks),
            steps=steps,
            recoverable_ns_per_step=rec,
            recoverable_method="worst rank's time with an HtoD/DtoH copy in flight (union over "
            "streams) inside the step windows / steps (upper bound: fully overlapped or avoided "
            "copies); steps listed when >= copy_min_pct of the step",
            metrics={
                "copies": int(n),
                "avg_bytes": float(avg_b or 0),
                "pageable": int(pageable or 0),
                "achieved_gb_per_s": float(gbps or 0),
                **step_metrics(ctx, steps, rec),
            },
            evidence=ev,
            signals=[
                Signal(
                    "pageable copies",
                    int(pageable or 0),
                    "copies",
                    "supports" if pageable else "neutral",
                    "pageable copies are staged and synchronous: pinned memory roughly doubles bandwidth",
                ),
                Signal(
                    "mean bytes per copy",
                    float(avg_b or 0),
                    "B",
                    "supports" if (avg_b or 0) < 65536 else "neutral",
                    "many small copies are latency bound: batch them",
                ),
                Signal(
                    "achieved bandwidth",
                    round(float(gbps or 0), 2),
                    "GB/s",
                    "neutral",
                    "compare with the link (PCIe Gen4 x16 ~25 GB/s, Gen5 ~50 GB/s per direction)",
                ),
            ],
            fixes=[
                *advice.kernel_fixes("transfer"),
                Fix("Batch small copies into one buffer", "extra packing code and a staging buffer"),
            ],
        )
    ]
