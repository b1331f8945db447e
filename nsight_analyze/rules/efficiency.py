"""HFU as a diagnostic: when hardware FLOPs are known, say where the missing utilisation goes.

Why: a low HFU is a symptom. Before anyone tunes kernels, the time partition says whether the GPU
was computing at all (idle, exposed communication, memory-bound work, launch and host stalls);
only the FLOP rate *while computing* is a kernel-efficiency question.
"""

from __future__ import annotations

from .. import mfu
from ..store.query_layer import statements
from .base import Ctx, Finding, Fix, Signal
from .declare import Cause, Doc, finding

SQL = statements("rules/efficiency")


@finding(
    "compute-efficiency",
    doc=Doc(
        what=(
            "HFU (Nsight Compute counters joined to the timeline) set against the partition: idle, "
            "exposed comms, memory-bound, launch/host shares and the FLOP rate while computing"
        ),
        source=(
            "`nsight_analyze.mfu.hfu_mfu_summary` (per-window kernel totals `hfu_window_kernels` when "
            "nothing was counted), `diag_windows`"
        ),
        recoverable="none of its own (the other findings bound each share); only when HFU is known",
    ),
    reads=("diag_windows", *mfu.READS),  # hfu_mfu_summary reads mfu's
    causes=(
        Cause(
            "compute-efficiency",
            ("compute-efficiency",),
            "Hardware FLOPs utilisation (HFU)",
            "fraction",
            magnitude="hfu",
        ),
    ),
)
def compute_efficiency(ctx: Ctx) -> list[Finding]:
    """HFU (Nsight Compute counters) split against the partition; no recoverable time of its own."""
    if not ctx.has("diag_windows"):
        return []
    try:
        summary = mfu.hfu_mfu_summary(ctx.con, detail=False)  # the totals only
    except Exception:  # noqa: BLE001 - HFU is optional context; its absence is not a finding
        return []
    hfu = summary.get("hfu")
    if hfu is None:
        return []
    p = ctx.row(SQL["partition_shares"])
    w = float(p["w"] or 0)
    if w <= 0:
        return []

    def share(col: str) -> float:
        return round(100.0 * float(p[col] or 0) / w, 2)

    compute_share = share("c") / 100.0
    hfu_computing = hfu / compute_share if compute_share > 0 else None
    signals = [
        Signal(
            "GPU idle",
            share("i"),
            "% of window",
            "supports" if share("i") > 10 else "neutral",
            "idle time lowers HFU without any kernel being slow: see the idle findings",
        ),
        Signal(
            "of which launch/host-bound",
            share("l"),
            "% of window",
            "supports" if share("l") > 5 else "neutral",
            "launch latency and host work",
        ),
        Signal(
            "of which input/sync stalls",
            share("h"),
            "% of window",
            "supports" if share("h") > 5 else "neutral",
            "host stalls",
        ),
        Signal(
            "exposed communication",
            share("n"),
            "% of window",
            "supports" if share("n") > 10 else "neutral",
            "collectives with nothing to overlap",
        ),
        Signal(
            "memory-bound work",
            share("m"),
            "% of window",
            "supports" if share("m") > 20 else "neutral",
            "elementwise/normalisation/copies: bandwidth, not FLOPs",
        ),
        Signal(
            "HFU while computing",
            None if hfu_computing is None else round(100 * hfu_computing, 1),
            "%",
            "supports" if hfu_computing is not None and hfu_computing < 0.4 else "against",
            "FLOP rate inside compute kernels: low means the kernels themselves are inefficient "
            "(tile shapes, precision, tensor-core use); high means the gap is outside the kernels",
        ),
    ]
    return [
        ctx.finding(
            id="compute-efficiency",
            title=f"HFU {100 * hfu:.1f} %: where the rest of the GPU time goes",
            kind="performance",
            summary=f"Hardware FLOP utilisation is {100 * hfu:.1f} %; the GPU computes {share('c')} % "
            f"of the time, "
            f"idles {share('i')} %, runs exposed comms {share('n')} % and memory-bound work {share('m')} %. "
            "Fix the largest non-compute share first (see the other findings).",
            ranks=[],
            steps=[],
            recoverable_ns_per_step=None,
            recoverable_method="not a separate saving: the other findings bound what each non-compute share "
            "can recover",
            metrics={
                "hfu": hfu,
                "mfu": summary.get("mfu"),
                "hfu_while_computing": hfu_computing,
                "coverage_pct": summary.get("coverage_pct"),
            },
            evidence=[
                ctx.evidence(
                    "time partition totals",
                    "Sum over ranks and steps of the partition (diag_windows).",
                    SQL["partition_totals"],
                )
            ],
            signals=signals,
            fixes=[
                Fix(
                    "Address the largest non-compute share first; tune kernels only when HFU while computing "
                    "is low",
                    "kernel tuning is shape specific and the gains are bounded by compute time",
                )
            ],
        )
    ]
