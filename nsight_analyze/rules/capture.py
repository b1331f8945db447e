"""Capture findings: facts about the trace that change how every other finding must be read.

They have no recoverable time and are listed before the performance findings.
"""

from __future__ import annotations

from ..sources.base import CORRUPT_TIMING
from ..summary import CORRUPT_TIMING_SQL
from .base import Ctx, Finding, Fix, Signal, mean


def clock_skew(ctx: Ctx) -> list[Finding]:
    """Hosts whose clocks disagreed: cross-rank timings are only as good as the correction."""
    if not ctx.has("merge_rank_clock", "alignment_quality"):
        return []
    th_ns = ctx.th["clock_skew_min_us"] * 1000
    skewed = ctx.rows(
        f"SELECT rank, host, correction_ns FROM merge_rank_clock WHERE abs(correction_ns) >= {th_ns} "
        "ORDER BY rank"
    )
    if not skewed:
        return []
    ev = [
        ctx.evidence(
            "clock alignment per host",
            "Refinement applied on top of the session-start (UTC) offsets and the residual after it "
            "(alignment_quality).",
            "SELECT * FROM alignment_quality ORDER BY host",
        ),
        ctx.evidence(
            "corrected ranks",
            "Ranks whose clock was corrected by more than the threshold (merge_rank_clock).",
            f"""SELECT rank, host, session_offset_ns, clock_offset_ns, correction_ns, alignment_method
                           FROM merge_rank_clock WHERE abs(correction_ns) >= {th_ns} ORDER BY rank""",
        ),
    ]
    worst = int(max(abs(r["correction_ns"]) for r in skewed))
    resid = ctx.scalar("SELECT max(residual_p95_ns) FROM alignment_quality")
    corrected = ctx.scalar(
        "SELECT bool_and(method = 'collectives') FROM alignment_quality "
        f"WHERE host IN (SELECT host FROM merge_rank_clock WHERE abs(correction_ns) >= {th_ns})"
    )
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


def cuda_graphs(ctx: Ctx) -> list[Finding]:
    """How much kernel time replays from CUDA graphs (per-kernel launch attribution is lost there)."""
    th = ctx.th["graph_min_pct"]
    if not ctx.has("diag_rank_kernels"):
        return []
    per_rank = ctx.rows(
        """SELECT rank, kernels, graph_kernels, 100.0 * graph_kernel_ns / nullif(kernel_ns, 0) AS graph_pct
           FROM diag_rank_kernels ORDER BY rank"""
    )
    covered = [r for r in per_rank if (r["graph_pct"] or 0) >= th]
    if not covered:
        return []
    launches = (
        ctx.scalar(
            "SELECT coalesce(sum(calls), 0) FROM api_summary "
            "WHERE name IN ('cudaGraphLaunch', 'cuGraphLaunch')"
        )
        if ctx.has("api_summary")
        else 0
    ) or 0
    ev = [
        ctx.evidence(
            "CUDA-graph coverage per rank",
            "Kernels replayed from CUDA graphs (graph_node_id set) and their share of kernel time.",
            """SELECT rank, kernels, graph_kernels, graphs,
                      round(100.0 * graph_kernel_ns / nullif(kernel_ns, 0), 2) AS graph_time_pct
               FROM diag_rank_kernels ORDER BY rank""",
        )
    ]
    steps: list[int] = []
    if ctx.has_steps and ctx.has("diag_window_bounds", "graph_coverage"):
        steps = [
            int(s)
            for s in ctx.column(
                """SELECT DISTINCT w.step FROM graph_coverage g JOIN diag_window_bounds w
                     ON w.rank = g.rank AND w.step IS NOT DISTINCT FROM g.step
                   WHERE g.graph_kernels > 0 ORDER BY 1"""
            )
        ]
    pct = mean(r["graph_pct"] for r in covered)
    return [
        ctx.finding(
            id="cuda-graphs",
            title=f"CUDA graphs replay {pct:.0f} % of kernel time",
            kind="capture",
            summary=f"{pct:.1f} % of kernel time on {len(covered)} rank(s) comes from {launches} "
            f"graph launches: "
            "launch gaps inside a graph are not host launch cost, and per-kernel launch attribution "
            "(which API call issued which kernel) is the graph launch's.",
            ranks=[int(r["rank"]) for r in covered],
            steps=steps,
            recoverable_ns_per_step=None,
            recoverable_method="not a performance problem: no recoverable time",
            metrics={"graph_time_pct": pct, "graph_launches": launches},
            evidence=ev,
            signals=[
                Signal(
                    "graph launches",
                    launches,
                    "calls",
                    "neutral",
                    "each replays many kernels for one host call",
                )
            ],
            fixes=[
                Fix(
                    "For per-kernel detail, capture with nsys --cuda-graph-trace=node",
                    "higher tracing overhead",
                )
            ],
        )
    ]


def corrupt_timing(ctx: Ctx) -> list[Finding]:
    """Files whose trace times are corrupt for some rows (the ingest's CORRUPT_TIMING warnings:
    rows that end before they start, GPU work ending long after the capture): every other
    finding reads the partition those rows distort, so this one comes first."""
    if not ctx.has("files", "ranks"):
        return []
    cut = len(CORRUPT_TIMING) + 1
    sql = f"SELECT path, ranks, substr(warning, {cut}) AS warning FROM ({CORRUPT_TIMING_SQL})"
    found = ctx.rows(sql)
    if not found:
        return []
    ranks = sorted({int(r) for f in found for r in f["ranks"]})
    files = len({f["path"] for f in found})
    return [
        ctx.finding(
            id="corrupt-timing",
            title=f"Corrupt timestamps in {files} file(s): the partition of rank(s) "
            f"{', '.join(map(str, ranks))} is distorted",
            kind="capture",
            severity="medium",
            summary=f"{len(found)} warning(s) of the ingest say some rows' times cannot be true ("
            + "; ".join(f["warning"] for f in found[:3])
            + "). The windows, idle time and shares of these ranks, and every finding built on them, "
            "are read from those rows as recorded.",
            ranks=ranks,
            steps=[],
            recoverable_ns_per_step=None,
            recoverable_method="not a performance problem: no recoverable time",
            metrics={"files": int(files), "warnings": int(len(found))},
            evidence=[
                ctx.evidence("files with corrupt timing", "The ingest's warnings (files.warnings).", sql)
            ],
            signals=[],
            fixes=[
                Fix(
                    "Capture again (a clean exit of the profiled process; a current nsys and driver); "
                    "or read these ranks' numbers only where the warned rows do not fall",
                    "a new capture costs a run",
                )
            ],
        )
    ]
