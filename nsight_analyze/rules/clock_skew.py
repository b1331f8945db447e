"""The `clock-skew` capture finding: hosts whose clocks disagreed, so cross-rank timings are only
as good as the clock correction.

Why a module of its own: one finding, one home; it reads the clock alignment's result
(merge_rank_clock, alignment_quality). A capture finding is a fact about the trace that changes how
every other finding must be read: it has no recoverable time and is listed before the performance
findings.
"""

from __future__ import annotations

from ..store.query_layer import statements
from .base import Ctx, Finding, Fix, Signal
from .declare import Cause, Doc, Threshold, finding

SQL = statements("rules/clock_skew")


@finding(
    "clock-skew",
    doc=Doc(
        what="host clocks corrected by more than `clock_skew_min_us`",
        source="`merge_rank_clock`, `alignment_quality`",
        recoverable="none (capture)",
    ),
    thresholds={
        "clock_skew_min_us": Threshold(100.0, "report clock corrections between hosts larger than this (us)"),
    },
    reads=("alignment_quality", "collectives", "imbalance", "steps"),
    causes=(
        Cause(
            "clock-skew",
            ("clock-skew",),
            "Clock correction between hosts",
            "ns",
            magnitude="max_correction_ns",
            threshold="clock_skew_min_us",
            of_step=False,
        ),
    ),
)
def clock_skew(ctx: Ctx) -> list[Finding]:
    """Hosts whose clocks disagreed: cross-rank timings are only as good as the correction."""
    if not ctx.has("merge_rank_clock", "alignment_quality"):
        return []
    th_ns = ctx.th["clock_skew_min_us"] * 1000
    skewed = ctx.rows(SQL.sql("skewed_ranks", th_ns=th_ns))
    if not skewed:
        return []
    ev = [
        ctx.evidence(
            "clock alignment per host",
            "Refinement applied on top of the session-start (UTC) offsets and the residual after it "
            "(alignment_quality).",
            SQL["alignment_per_host"],
        ),
        ctx.evidence(
            "corrected ranks",
            "Ranks whose clock was corrected by more than the threshold (merge_rank_clock).",
            SQL.sql("corrected_ranks", th_ns=th_ns),
        ),
    ]
    worst = int(max(abs(r["correction_ns"]) for r in skewed))
    resid = ctx.scalar(SQL["max_residual_p95"])
    corrected = ctx.scalar(SQL.sql("skewed_hosts_corrected", th_ns=th_ns))
    hosts = sorted({str(r["host"]) for r in skewed})
    return [
        ctx.finding(
            id="clock-skew",
            title=f"Host clocks disagreed by up to {worst / 1e6:.3f} ms (corrected)"
            if corrected
            else f"Host clocks disagree by up to {worst / 1e6:.3f} ms",
            kind="capture",
            severity="info" if corrected else "medium",
            summary=f"The session-start (UTC) clocks of {', '.join(hosts)} were off by up to "
            f"{worst / 1e6:.3f} ms; "
            + (
                "the collectives' common end times corrected it"
                if corrected
                else "no collective-based correction: cross-rank arrival times are unreliable"
            )
            + (f" (residual p95 {resid} ns)." if resid is not None else "."),
            ranks=[int(r["rank"]) for r in skewed],
            steps=[],
            recoverable_ns_per_step=None,
            recoverable_method="not a performance problem: no recoverable time",
            metrics={"max_correction_ns": worst, "residual_p95_ns": resid, "hosts": hosts},
            evidence=ev,
            signals=[
                Signal(
                    "alignment method",
                    "collectives" if corrected else "session-start",
                    "",
                    "neutral",
                    "load-imbalance numbers use per-rank compute and do not depend on the alignment; "
                    "arrival skews and waits do",
                )
            ],
            fixes=[
                Fix(
                    "Synchronise host clocks (chrony/PTP) before profiling multi-node jobs",
                    "cluster configuration outside the job",
                )
            ],
        )
    ]
