"""CUDA-graph candidates: islands of consecutive kernels outside graphs, each preceded by launch or
host-bound idle, that one graph launch could replace.

Why: launch-bound idle is only recoverable where the kernels can be captured; the stored regions
(`graph_candidates`) and the coverage already replayed from graphs (`graph_coverage`) say where.
The recoverable time is bounded by the no-launch-gaps what-if (declared below).
"""

from __future__ import annotations

from ..store.query_layer import statements
from ._chains import per_step_worst
from ._common import step_metrics
from .base import Ctx, Finding, Fix, Signal
from .declare import Doc, Threshold, finding

SQL = statements("rules/cuda_graph_candidates")


@finding(
    "cuda-graph-candidates",
    doc=Doc(
        what=(
            "islands of >= `graph_candidate_min_kernels` consecutive kernels outside graphs each "
            "preceded by launch/host-bound idle; metrics give the graph coverage (share of kernels and "
            "kernel time replayed from graphs, graph launches)"
        ),
        source="`graph_candidates`, `graph_coverage`, `api_summary`",
        recoverable=(
            "per step, worst rank's launch_gap + host_bound idle in the regions; >= `graph_candidate_min_pct`"
        ),
    ),
    thresholds={
        "graph_candidate_min_kernels": Threshold(
            20.0,
            (
                "a run of at least this many consecutive launch-bound kernels outside graphs is a "
                "CUDA-graph candidate"
            ),
        ),
        "graph_candidate_min_pct": Threshold(
            1.0, "report CUDA-graph candidates when their launch idle is >= this % of the mean step"
        ),
    },
    reads=("api_summary", "capture_phases", "gaps", "graph_candidates", "graph_coverage", "steps"),
    whatif="no-launch-gaps",
)
def cuda_graph_candidates(ctx: Ctx) -> list[Finding]:
    """Launch-bound regions outside CUDA graphs, with the job's graph coverage as context."""
    if not ctx.has("graph_candidates", "graph_coverage"):
        return []
    n_min = int(ctx.th["graph_candidate_min_kernels"])
    # capture and compilation are one-time work, not steady state
    steady = ctx.has("capture_phases")
    only_steady = SQL["outside_one_time_phases"] if steady else ""
    regions = SQL.sql("candidate_regions", min_kernels=n_min, steady=only_steady)
    total, steps, ranks = per_step_worst(ctx, SQL.sql("region_idle", regions=regions))
    rec = ctx.per_step(total)
    if not total or (ctx.pct(rec) or 0) < ctx.th["graph_candidate_min_pct"]:
        return []
    cov = ctx.row(SQL["graph_coverage_totals"])
    launches = ctx.scalar(SQL["graph_launches"]) if ctx.has("api_summary") else None
    k = float(cov["kernels"] or 0)
    launch_pct = round(100.0 * float(cov["graph_kernels"] or 0) / k, 2) if k else None
    time_pct = (
        round(100.0 * float(cov["graph_kernel_ns"] or 0) / float(cov["kernel_ns"]), 2)
        if cov["kernel_ns"]
        else None
    )
    stats = ctx.row(SQL.sql("region_stats", regions=regions))
    ev = [
        ctx.evidence(
            "launch-bound regions outside graphs",
            f"Islands of >= {n_min} consecutive kernels (over all streams of a rank) each preceded by "
            "GPU idle while the host launched it or had not yet (gaps: launch_gap, host_bound), none "
            "replayed from a graph (graph_candidates).",
            SQL.sql("regions_evidence", min_kernels=n_min, steady=only_steady),
        ),
        ctx.evidence(
            "CUDA-graph coverage per rank",
            "Kernels and kernel time replayed from CUDA graphs in the step windows (graph_coverage).",
            SQL["graph_coverage_per_rank"],
        ),
    ]
    host_share = float(stats["idle_ns"] or 0)
    return [
        ctx.finding(
            id="cuda-graph-candidates",
            title="Launch-bound kernel regions outside CUDA graphs",
            kind="performance",
            summary=f"{int(stats['regions'])} regions of >= {n_min} kernels launched one by one keep the GPU "
            f"idle {rec / 1e6:.3f} ms per step ({ctx.pct(rec)} % of the mean step) between kernels; "
            f"CUDA graphs cover {launch_pct} % of the kernels and {time_pct} % of kernel time "
            f"({launches} graph launches).",
            ranks=ranks,
            steps=steps,
            recoverable_ns_per_step=rec,
            recoverable_method="per step, worst rank's launch_gap + host_bound idle before the kernels "
            "of the candidate regions / steps (upper bound: a graph replays them back to back; replay "
            "still leaves ~1-2 us between dependent kernels)",
            metrics={
                "regions": int(stats["regions"]),
                "region_kernels": int(stats["kernels"]),
                "region_idle_ns_total": int(host_share),
                "graph_launch_pct": launch_pct,
                "graph_time_pct": time_pct,
                "graph_launches": launches,
                "min_kernels": n_min,
                **step_metrics(ctx, steps, rec),
            },
            evidence=ev,
            signals=[
                Signal(
                    "short kernels in the regions",
                    int(stats["short_kernels"] or 0),
                    "kernels",
                    "supports" if (stats["short_kernels"] or 0) * 2 >= (stats["kernels"] or 1) else "neutral",
                    f"kernels shorter than 10 us, out of {int(stats['kernels'])}: the launch costs more than "
                    "they run",
                ),
                Signal(
                    "graph coverage (launches)",
                    launch_pct,
                    "% of kernels",
                    "supports" if not launch_pct else "neutral",
                    "kernels already replayed from graphs have no per-kernel launch cost",
                ),
            ],
            fixes=[
                Fix(
                    "Capture the region in a CUDA graph: torch.compile(mode='reduce-overhead'), "
                    "torch.cuda.graphs / make_graphed_callables, or the framework's graph option "
                    "(Megatron/TE CUDA graphs, vLLM/TRT-LLM)",
                    "static shapes and addresses (pad or bucket dynamic shapes, one graph per shape); "
                    "graphs keep a private memory pool (more memory); no host sync, .item() or "
                    "CPU-side control flow inside the region; capture time at start-up",
                ),
                Fix(
                    "Or reduce the kernel count first (fusion, foreach/fused optimizers) so fewer launches "
                    "are left",
                    "see the fusion candidates' trade-offs",
                ),
            ],
        )
    ]
