"""The `cuda-graphs` capture finding: how much kernel time replays from CUDA/HIP graphs (per-kernel
launch attribution is lost there).

Why a module of its own: its fix fits what recorded the trace (`_graph_trace_fixes`: nsys per graph
or per node, the PyTorch profiler on CUDA or on ROCm), a choice no other rule makes. A capture
finding is a fact about the trace that changes how every other finding must be read: it has no
recoverable time and is listed before the performance findings.
"""

from __future__ import annotations

from ..gpus import VENDOR_SQL
from ..store.query_layer import statements
from .base import Ctx, Finding, Fix, Signal, mean
from .declare import Cause, Doc, Threshold, finding

SQL = statements("rules/cuda_graphs")


@finding(
    "cuda-graphs",
    doc=Doc(
        what=(
            "kernel time replayed from CUDA/HIP graphs: kernels with an nsys graph node id or launched "
            "by a graph launch call (cudaGraphLaunch, cuGraphLaunch, hipGraphLaunch, any suffix: "
            "`is_graph_launch`), so Kineto traces count too. Its fix fits what recorded the trace "
            "(`rules/cuda_graphs._graph_trace_fixes`): an nsys capture without graph node ids: "
            "`--cuda-graph-trace=node`; one with them: already per node; the PyTorch profiler on CUDA, "
            "or on ROCm (tracer `roctracer`/`hip`, or `hipGraphLaunch` calls): nothing to change for "
            "per-kernel times (each replayed kernel is recorded, linked to its graph launch), profile "
            "the capture or an eager step to attribute kernels to ops"
        ),
        source=(
            "`diag_rank_kernels` (per-rank totals), `graph_coverage`, `api_summary` (graph launches), "
            "`files`, `kernels.graph_node_id`"
        ),
        recoverable="none (capture)",
    ),
    thresholds={
        "graph_min_pct": Threshold(
            1.0, "report CUDA-graph coverage when graphs run >= this % of kernel time"
        ),
    },
    reads=("api_summary", "diag_rank_kernels", "diag_window_bounds", "gaps", "graph_coverage", "steps"),
    causes=(
        Cause(
            "cuda-graphs",
            ("cuda-graphs",),
            "Kernel time launched from CUDA graphs",
            "pct",
            magnitude="graph_time_pct",
            threshold="graph_min_pct",
            of_step=False,
        ),
    ),
)
def cuda_graphs(ctx: Ctx) -> list[Finding]:
    """How much kernel time replays from CUDA graphs (per-kernel launch attribution is lost there)."""
    th = ctx.th["graph_min_pct"]
    if not ctx.has("diag_rank_kernels"):
        return []
    per_rank = ctx.rows(SQL["graph_share_per_rank"])
    covered = [r for r in per_rank if (r["graph_pct"] or 0) >= th]
    if not covered:
        return []
    launches = (ctx.scalar(SQL["graph_launches"]) if ctx.has("api_summary") else 0) or 0
    ev = [
        ctx.evidence(
            "CUDA-graph coverage per rank",
            "Kernels replayed from CUDA/HIP graphs (a graph node, or launched by a graph launch call: "
            "cudaGraphLaunch, cuGraphLaunch, hipGraphLaunch) and their share of kernel time.",
            SQL["graph_coverage_per_rank"],
        )
    ]
    steps: list[int] = []
    if ctx.has_steps and ctx.has("diag_window_bounds", "graph_coverage"):
        steps = [int(s) for s in ctx.column(SQL["graph_steps"])]
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
            fixes=_graph_trace_fixes(ctx, [int(r["rank"]) for r in covered]),
        )
    ]


# What a graph replay hides and how to see it depends on what recorded the trace.
_GRAPH_FIXES = {
    # an Nsight Systems capture whose graph kernels carry no node id: traced per graph
    "nsys": Fix(
        "For per-kernel detail inside the graphs, capture again with nsys --cuda-graph-trace=node "
        "(the default traces each graph launch as one range)",
        "higher tracing overhead: node-level tracing adds a record per kernel of every replay",
    ),
    # an Nsight Systems capture whose graph kernels carry graph and node ids: already node level
    "nsys-node": Fix(
        "Nothing to change in the capture: it is already traced per graph node (each kernel with its "
        "graph and node id); to attribute a node to the code that recorded it, profile the capture "
        "phase too (NVTX ranges around the captured region) or one step with graphs off",
        "an eager step pays the launch cost the graph hides: time it apart from the replay",
    ),
    # PyTorch profiler on CUDA: CUPTI records every replayed kernel, correlated to the graph launch
    "kineto": Fix(
        "Nothing to change for per-kernel times: the PyTorch profiler already records every kernel a "
        "graph replays, linked to its cudaGraphLaunch by correlation id (nsys --cuda-graph-trace=node "
        "does not add kernels it lacks). To see which op issued each kernel, profile one step with "
        "graphs off (torch.compile without mode='reduce-overhead', vLLM --enforce-eager) or the capture",
        "an eager step pays the launch cost the graph hides: time it apart from the replay",
    ),
    # PyTorch profiler on ROCm (roctracer): the same, and nsys's flag does not exist there
    "kineto-rocm": Fix(
        "Nothing to change for per-kernel times: the ROCm tracer already records every kernel a "
        "hipGraphLaunch replays (nsys --cuda-graph-trace=node does not apply to AMD GPUs). To see "
        "which op issued each kernel, profile the capture (hipStreamBeginCapture to EndCapture) or one "
        "step with graphs off (vLLM --enforce-eager)",
        "an eager step pays the launch cost the graph hides: time it apart from the replay",
    ),
}


def _graph_trace_fixes(ctx: Ctx, ranks: list[int]) -> list[Fix]:
    """The fix that fits what recorded the graph-covered ranks: nsys (traced per graph or already per
    node), the PyTorch profiler on CUDA, or on ROCm (its tracer, gpus.VENDOR_SQL, or HIP graph
    launches). Why: `--cuda-graph-trace=node` is an nsys flag; a Kineto trace already holds each
    replayed kernel and a ROCm one has no such flag, so offering it there sends the engineer to a
    capture that changes nothing."""
    if not ranks or not ctx.has("ranks", "files"):
        return []
    hip = SQL["hip_graph_ranks"] if ctx.has("api_summary", "is_graph_launch") else SQL["no_ranks"]
    node = SQL["node_traced_ranks"] if ctx.has("kernels") else SQL["no_ranks"]
    in_list = ", ".join(str(int(x)) for x in ranks)
    kinds = ctx.column(SQL.sql("trace_kinds", node=node, hip=hip, vendor=VENDOR_SQL, ranks=in_list))
    return [_GRAPH_FIXES[k] for k in kinds if k in _GRAPH_FIXES]
