"""Kernel-level fixes: fusion candidates, CUDA-graph candidates, unfused attention (GEMM precision:
precision.py).

Why: after the idle and communication findings, the next question is which kernels to change and
how much that buys. Each rule here reads a stored per-rank result (`kernel_chains`,
`graph_coverage`, `graph_candidates`, `kernel_summary`), so
diagnose never walks the kernels again; the recoverable times are upper bounds per step, worst rank
per step (docs/diagnose.md "Recoverable time"), and every fix states what it costs.
"""

from __future__ import annotations

import math

from ._common import step_metrics
from ._whatif import bounded_by
from .base import Ctx, Finding, Fix, Signal
from .op_roofline import op_evidence


def _per_step(ctx: Ctx, per_rank_step_sql: str) -> tuple[float, list[int], list[int]]:
    """Total over steps of the worst rank's value per step, the steps and ranks with a value.

    `per_rank_step_sql` yields rows (rank, step, v) for chains inside the windows.
    """
    rows = [
        r
        for r in ctx.rows(f"SELECT rank, step, sum(v) AS v FROM ({per_rank_step_sql}) GROUP BY ALL")
        if r["v"] is not None and r["v"] > 0
    ]
    worst: dict[int | None, float] = {}
    for r in rows:
        worst[r["step"]] = max(worst.get(r["step"], r["v"]), r["v"])
    total = float(sum(worst.values()))
    steps = sorted({int(r["step"]) for r in rows if r["step"] is not None}) if ctx.has_steps else []
    ranks = sorted({int(r["rank"]) for r in rows})
    return total, steps, ranks


# ------------------------------------------------------------------------------------------------
# Fusion candidates


def fusion_candidates(ctx: Ctx) -> list[Finding]:
    """Chains of consecutive memory-bound elementwise/normalisation kernels with short gaps."""
    if not ctx.has("kernel_chains"):
        return []
    n_min = int(ctx.th["fusion_min_kernels"])
    where = f"kind = 'fusion' AND in_window AND kernels >= {n_min}"
    total, steps, ranks = _per_step(
        ctx,
        f"SELECT rank, step, (end_ns - start_ns) - max_kernel_ns AS v FROM kernel_chains WHERE {where}",
    )
    rec = ctx.per_step(total)
    if not total or (ctx.pct(rec) or 0) < ctx.th["fusion_min_pct"]:
        return []
    stats = ctx.row(
        f"""SELECT count(*) AS chains, sum(kernels) AS kernels, min(kernels) AS shortest,
                   max(kernels) AS longest,
                   sum(end_ns - start_ns) AS span_ns, sum(busy_ns) AS busy_ns,
                   sum(end_ns - start_ns - busy_ns) AS gap_ns, sum(graph_kernels) AS graph_kernels,
                   median(busy_ns / kernels) AS median_kernel_ns
            FROM kernel_chains WHERE {where}"""
    )
    n_win = (len(steps) if steps else ctx.n_steps) * max(len(ranks), 1)  # affected (rank, step) windows
    per_step_kernels = float(stats["kernels"]) / max(n_win, 1)
    ev = [
        ctx.evidence(
            "fusion candidates by chain",
            f"Runs of >= {n_min} consecutive memory-bound elementwise/normalisation kernels on one "
            "stream, each within 5 us of the previous one (kernel_chains), grouped by the kernels they "
            "run: launches, time, and the bound on what fusing each run into one kernel saves.",
            f"""SELECT names, kernels, count(*) AS chains, list(DISTINCT rank ORDER BY rank) AS ranks,
                       list(DISTINCT step ORDER BY step) AS steps, sum(busy_ns) AS kernel_ns,
                       sum(end_ns - start_ns) AS span_ns,
                       sum(end_ns - start_ns - max_kernel_ns) AS recoverable_ns
                FROM kernel_chains WHERE {where}
                GROUP BY names, kernels ORDER BY recoverable_ns DESC, kernels DESC, names""",
        ),
        ctx.evidence(
            "fusion candidates per rank and step",
            "Chains, kernels and recoverable time per rank and step window.",
            f"""SELECT rank, step, count(*) AS chains, sum(kernels) AS kernels, sum(busy_ns) AS kernel_ns,
                       sum(end_ns - start_ns - max_kernel_ns) AS recoverable_ns
                FROM kernel_chains WHERE {where} GROUP BY rank, step ORDER BY rank, step""",
        ),
    ]
    short_ns = ctx.th["short_kernel_us"] * 1000
    med = float(stats["median_kernel_ns"] or 0)
    return [
        ctx.finding(
            id="fusion-candidates",
            title="Chains of unfused elementwise/normalisation kernels",
            kind="performance",
            summary=f"{int(stats['chains'])} chains of {int(stats['shortest'])} to {int(stats['longest'])} "
            f"consecutive memory-bound kernels ({per_step_kernels:.0f} launches per affected rank and step) "
            f"run {float(stats['busy_ns']) / max(n_win, 1) / 1e6:.3f} ms per affected rank and step; "
            f"fusing each chain into one kernel saves up to {rec / 1e6:.3f} ms per step "
            f"({ctx.pct(rec)} % of the mean step).",
            ranks=ranks,
            steps=steps,
            recoverable_ns_per_step=rec,
            recoverable_method="per step, worst rank's sum over chains of (span - longest kernel): a "
            "fused kernel is taken to run at least as long as the chain's longest member, the other "
            "members' memory round trips and the launch gaps between them go away; / steps",
            metrics={
                "chains": int(stats["chains"]),
                "chain_kernels": int(stats["kernels"]),
                "longest_chain": int(stats["longest"]),
                "chain_kernel_ns_total": int(stats["busy_ns"]),
                "chain_gap_ns_total": int(stats["gap_ns"]),
                "min_kernels": n_min,
                **step_metrics(ctx, steps, rec),
            },
            evidence=ev,
            signals=[
                Signal(
                    "median kernel in the chains",
                    round(med),
                    "ns",
                    "supports" if med < short_ns else "neutral",
                    "short kernels: launch and memory latency dominate, fusion removes both"
                    if med < short_ns
                    else "long kernels stream at bandwidth: fusion saves the intermediate reads/writes",
                ),
                Signal(
                    "gaps inside the chains",
                    int(stats["gap_ns"]),
                    "ns",
                    "neutral",
                    "launch gaps between the chained kernels, also removed by fusion",
                ),
                Signal(
                    "source",
                    "kernel name rules",
                    "",
                    "neutral",
                    "memory-bound by name class; Nsight Compute (DRAM throughput) confirms it",
                ),
            ],
            fixes=[
                Fix(
                    "Compile the model region (torch.compile, mode='max-autotune-no-cudagraphs' or "
                    "default): Inductor fuses chains of pointwise/reduction ops into one Triton kernel",
                    "compile time at start-up and on every new shape (recompiles on dynamic shapes), "
                    "harder debugging; fused kernels use more registers (lower occupancy)",
                ),
                Fix(
                    "Use fused library kernels for the pattern: fused LayerNorm/RMSNorm (Apex, "
                    "Transformer Engine), fused bias+activation (GELU/SwiGLU), fused optimizers "
                    "(AdamW(fused=True))",
                    "an extra dependency; fused kernels support fewer dtypes/shapes; another "
                    "implementation to validate numerically",
                ),
                Fix(
                    "Write the chain as one custom kernel (Triton) when no library kernel fits",
                    "code to maintain and tune per GPU; register pressure limits how much fits",
                ),
            ],
        )
    ]


# ------------------------------------------------------------------------------------------------
# Unfused attention


def _score_matrix(ctx: Ctx):
    """(evidence, largest score-matrix bytes, its rank's GPU memory bytes, shape sources) when the
    trace has the softmaxes' shapes (queries/kernels/attention_scores.sql: Kineto record_shapes or
    emit_nvtx)."""
    if not ctx.has("attention_scores"):
        return None, None, None, []
    row = ctx.row(
        "SELECT max(score_bytes) AS s, arg_max(gpu_memory_bytes, score_bytes) AS m, "
        "list(DISTINCT shape_source ORDER BY shape_source) AS src FROM attention_scores WHERE in_window"
    )
    if not row.get("s"):
        return None, None, None, []
    mem = row["m"]
    ev = ctx.evidence(
        "score-matrix shapes",
        "Shape of each unfused softmax's input (the b x h x n x n score matrix) from the op that "
        "launched it (Kineto record_shapes, or the emit_nvtx range around the launch), its size in "
        "bytes and against the GPU's memory (attention_scores).",
        """SELECT op, dims, elem_bytes, score_bytes, shape_source, count(*) AS softmaxes,
                  max(pct_of_gpu_memory) AS pct_of_gpu_memory, max(peak_bytes_in_use) AS peak_bytes_in_use,
                  list(DISTINCT rank ORDER BY rank) AS ranks
           FROM attention_scores WHERE in_window GROUP BY ALL ORDER BY score_bytes DESC, op""",
    )
    return ev, int(row["s"]), (int(mem) if mem else None), list(row["src"])


def _chain_gemm_shapes(ctx: Ctx, ev: list, where: str) -> list[Signal]:
    """Signals from the shapes of the ops that launched the sequences' GEMMs (op_roofline: Kineto
    record_shapes; the evidence table is appended to `ev`).

    Q @ K^T and P @ V move the L x L score matrix through memory: their arithmetic intensity is
    about the head size, below the ridge point of a tensor-core GPU, so they run memory bound on
    bytes a fused kernel never writes. A GEMM above the ridge is compute bound: fusing saves less
    than the finding's bound suggests (the chain may not be attention at all)."""
    got = op_evidence(
        ctx,
        "shapes of the sequences' GEMMs",
        "the GEMM kernels of the GEMM -> softmax -> GEMM sequences",
        f"""SELECT k.rank, k.correlation_id, k.name, k.duration_ns
            FROM kernels k JOIN (SELECT * FROM kernel_chains WHERE {where}) c
              ON c.rank = k.rank AND c.device_id IS NOT DISTINCT FROM k.device_id
             AND c.stream_id = k.stream_id AND k.start_ns >= c.start_ns AND k.end_ns <= c.end_ns
            WHERE k.subcategory = 'gemm'""",
    )
    if got is None:
        return []
    ev.append(got[0])
    known = [r for r in got[1] if r["intensity"] is not None and r["ridge_flop_per_byte"] is not None]
    ns = math.fsum(float(r["kernel_ns"]) for r in known)
    if not ns:
        return [
            Signal(
                "sequence GEMMs below the ridge point",
                None,
                "%",
                "neutral",
                "unknown: the GEMMs' bytes (dtype) or the GPU's peak / memory bandwidth are not known",
            )
        ]
    low = math.fsum(float(r["kernel_ns"]) for r in known if r["intensity"] < r["ridge_flop_per_byte"])
    pct = round(100.0 * low / ns, 1)
    return [
        Signal(
            "sequence GEMMs below the ridge point",
            pct,
            "%",
            "supports" if pct >= 50 else "against",
            "share of the sequences' GEMM kernel time (with recorded shapes) whose op's arithmetic "
            "intensity is below the GPU's ridge point (dense peak of its dtype / memory bandwidth)"
            + (
                ": memory bound on the score matrix a fused kernel keeps on chip"
                if pct >= 50
                else ": compute bound, fusing saves the softmax and its traffic, not GEMM time"
            ),
        )
    ]


def unfused_attention(ctx: Ctx) -> list[Finding]:
    """GEMM -> softmax -> GEMM sequences on one stream: attention without a fused kernel."""
    if not ctx.has("kernel_chains"):
        return []
    where = "kind = 'attention' AND in_window"
    total, steps, ranks = _per_step(
        ctx, f"SELECT rank, step, (end_ns - start_ns) - gemm_ns AS v FROM kernel_chains WHERE {where}"
    )
    rec = ctx.per_step(total)
    if not total or (ctx.pct(rec) or 0) < ctx.th["attention_min_pct"]:
        return []
    stats = ctx.row(
        f"""SELECT count(*) AS chains, sum(end_ns - start_ns) AS span_ns, sum(gemm_ns) AS gemm_ns,
                   sum(kernels) AS kernels FROM kernel_chains WHERE {where}"""
    )
    fused = (
        ctx.scalar("SELECT coalesce(sum(total_ns), 0) FROM kernel_summary WHERE subcategory = 'attention'")
        if ctx.has("kernel_summary")
        else 0
    )
    ev = [
        ctx.evidence(
            "unfused attention sequences",
            "GEMM, softmax, GEMM on one stream with only elementwise/dropout/copy kernels between "
            "(kernel_chains kind attention): the score matrix goes through GPU memory twice.",
            f"""SELECT softmax_name, kernels, count(*) AS sequences, list(DISTINCT rank ORDER BY rank)
                       AS ranks, sum(end_ns - start_ns) AS span_ns, sum(gemm_ns) AS gemm_ns,
                       sum(end_ns - start_ns - gemm_ns) AS recoverable_ns,
                       arg_max(names, (end_ns - start_ns - gemm_ns, names)) AS example
                FROM kernel_chains WHERE {where}
                GROUP BY softmax_name, kernels ORDER BY recoverable_ns DESC, softmax_name""",
        )
    ]
    n = int(stats["chains"])
    shapes, score, mem, sources = _score_matrix(ctx)
    if shapes is not None:
        ev.append(shapes)
    gemm_signals = _chain_gemm_shapes(ctx, ev, where)
    per_rank_step = n / max(ctx.n_steps, 1) / max(ctx.n_ranks, 1)
    return [
        ctx.finding(
            id="unfused-attention",
            title="Attention runs as batched GEMM -> softmax -> batched GEMM (no fused kernel)",
            kind="performance",
            summary=f"{per_rank_step:.0f} GEMM -> softmax -> GEMM sequences per rank and step "
            "materialise the attention score matrix in GPU memory; a fused attention kernel "
            f"(FlashAttention / SDPA) saves up to {rec / 1e6:.3f} ms per step ({ctx.pct(rec)} % of the "
            "mean step) and the score matrix's memory"
            + (
                f" (up to {score / 2**20:.0f} MiB per softmax"
                + (f", {100.0 * score / mem:.1f} % of GPU memory)." if mem else ").")
                if score
                else "."
            ),
            ranks=ranks,
            steps=steps,
            recoverable_ns_per_step=rec,
            recoverable_method="per step, worst rank's sum over sequences of (span - the two GEMMs): "
            "the softmax, masking/scaling/dropout kernels and gaps between the GEMMs, which a fused "
            "kernel keeps on chip; the GEMM FLOPs remain; / steps",
            metrics={
                "sequences": n,
                "sequence_kernels": int(stats["kernels"]),
                "gemm_ns_total": int(stats["gemm_ns"]),
                "span_ns_total": int(stats["span_ns"]),
                "fused_attention_ns_total": int(fused or 0),
                "score_matrix_bytes": score,
                "score_matrix_pct_of_gpu_memory": round(100.0 * score / mem, 2) if score and mem else None,
                "score_matrix_note": "largest b*h*n^2*bytes over the softmaxes, from their input shapes ("
                + ", ".join(sources)
                + "), against the rank's GPU memory"
                if score
                else "b*h*n^2*bytes needs the softmax's input shape: profile with "
                "torch.profiler.profile(record_shapes=True) or "
                "torch.autograd.profiler.emit_nvtx(record_shapes=True); the trace has none",
                **step_metrics(ctx, steps, rec),
            },
            evidence=ev,
            signals=[
                Signal(
                    "fused attention kernels in the job",
                    int(fused or 0),
                    "ns",
                    "against" if fused else "supports",
                    "some attention already uses fused kernels: these sequences may be another "
                    "attention variant (masking, dtype) the fused path does not accept"
                    if fused
                    else "no flash/SDPA kernel anywhere in the job",
                ),
                Signal(
                    "source",
                    "kernel order on the stream",
                    "",
                    "neutral",
                    "the pattern, not shapes: a non-attention GEMM -> softmax -> GEMM (a router) "
                    "matches too; check the evidence names",
                ),
                *gemm_signals,
            ],
            fixes=[
                Fix(
                    "Call torch.nn.functional.scaled_dot_product_attention (or FlashAttention / "
                    "cuDNN fused attention, Transformer Engine DotProductAttention) instead of "
                    "matmul -> softmax -> matmul",
                    "fused kernels support fewer masks, dtypes and head sizes (else SDPA falls back to "
                    "the math path); results differ in the last bits (different summation order); "
                    "backward recomputes the scores (more FLOPs, far less memory)",
                ),
                Fix(
                    "If the mask is what blocks the fused path, express it as is_causal or a "
                    "FlexAttention score_mod/block mask",
                    "FlexAttention needs torch.compile (compile time)",
                ),
            ],
        )
    ]


# ------------------------------------------------------------------------------------------------
# CUDA-graph coverage and candidates


@bounded_by("no-launch-gaps")  # recoverable time <= the what-if gain (rules/_whatif.py)
def cuda_graph_candidates(ctx: Ctx) -> list[Finding]:
    """Launch-bound regions outside CUDA graphs, with the job's graph coverage as context."""
    if not ctx.has("graph_candidates", "graph_coverage"):
        return []
    n_min = int(ctx.th["graph_candidate_min_kernels"])
    where = f"kernels >= {n_min}"
    if ctx.has("capture_phases"):  # capture and compilation are one-time work, not steady state
        where += (
            " AND NOT EXISTS (SELECT 1 FROM capture_phases AS p WHERE p.rank = graph_candidates.rank "
            "AND p.start_ns < graph_candidates.end_ns AND p.end_ns > graph_candidates.start_ns)"
        )
    total, steps, ranks = _per_step(
        ctx, f"SELECT rank, step, idle_ns AS v FROM graph_candidates WHERE {where}"
    )
    rec = ctx.per_step(total)
    if not total or (ctx.pct(rec) or 0) < ctx.th["graph_candidate_min_pct"]:
        return []
    cov = ctx.row(
        """SELECT sum(kernels) AS kernels, sum(graph_kernels) AS graph_kernels, sum(kernel_ns) AS kernel_ns,
                  sum(graph_kernel_ns) AS graph_kernel_ns FROM graph_coverage"""
    )
    launches = (
        ctx.scalar("SELECT coalesce(sum(calls), 0) FROM api_summary WHERE is_graph_launch(name)")
        if ctx.has("api_summary")
        else None
    )
    k = float(cov["kernels"] or 0)
    launch_pct = round(100.0 * float(cov["graph_kernels"] or 0) / k, 2) if k else None
    time_pct = (
        round(100.0 * float(cov["graph_kernel_ns"] or 0) / float(cov["kernel_ns"]), 2)
        if cov["kernel_ns"]
        else None
    )
    stats = ctx.row(
        f"""SELECT count(*) AS regions, sum(kernels) AS kernels, sum(short_kernels) AS short_kernels,
                   sum(busy_ns) AS busy_ns, sum(idle_ns) AS idle_ns, max(streams) AS streams
            FROM graph_candidates WHERE {where}"""
    )
    ev = [
        ctx.evidence(
            "launch-bound regions outside graphs",
            f"Islands of >= {n_min} consecutive kernels (over all streams of a rank) each preceded by "
            "GPU idle while the host launched it or had not yet (gaps: launch_gap, host_bound), none "
            "replayed from a graph (graph_candidates).",
            f"""SELECT rank, step, start_ns, end_ns - start_ns AS span_ns, kernels, streams, busy_ns, idle_ns,
                       launch_gap_ns, host_bound_ns, short_kernels, first_name
                FROM graph_candidates WHERE {where} ORDER BY idle_ns DESC, rank, start_ns""",
        ),
        ctx.evidence(
            "CUDA-graph coverage per rank",
            "Kernels and kernel time replayed from CUDA graphs in the step windows (graph_coverage).",
            """SELECT rank, sum(kernels) AS kernels, sum(graph_kernels) AS graph_kernels,
                      round(100.0 * sum(graph_kernels) / nullif(sum(kernels), 0), 2) AS graph_launch_pct,
                      round(100.0 * sum(graph_kernel_ns) / nullif(sum(kernel_ns), 0), 2) AS graph_time_pct
               FROM graph_coverage GROUP BY rank ORDER BY rank""",
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
