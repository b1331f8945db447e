"""Kernel-level fixes: fusion candidates, CUDA-graph candidates, GEMM precision, unfused attention.

Why: after the idle and communication findings, the next question is which kernels to change and
how much that buys. Each rule here reads a stored per-rank result (`kernel_chains`,
`graph_coverage`, `graph_candidates`, `kernel_summary` with the `gemm_precision` name macro), so
diagnose never walks the kernels again; the recoverable times are upper bounds per step, worst rank
per step (docs/diagnose.md "Recoverable time"), and every fix states what it costs.
"""

from __future__ import annotations

import pandas as pd

from .. import gpus
from ..diagnose import Ctx, Finding, Fix, Signal
from ._common import step_metrics


def _per_step(ctx: Ctx, per_rank_step_sql: str) -> tuple[float, list[int], list[int], pd.DataFrame]:
    """Total over steps of the worst rank's value per step, the steps and ranks with a value.

    `per_rank_step_sql` yields rows (rank, step, v) for chains inside the windows.
    """
    df = ctx.df(f"SELECT rank, step, sum(v) AS v FROM ({per_rank_step_sql}) GROUP BY ALL")
    if df.empty:
        return 0.0, [], [], df
    df = df[df["v"] > 0]
    total = float(df.groupby("step", dropna=False)["v"].max().sum()) if len(df) else 0.0
    steps = sorted(int(s) for s in df["step"].dropna().unique()) if ctx.has_steps else []
    ranks = sorted(int(r) for r in df["rank"].unique())
    return total, steps, ranks, df


# ------------------------------------------------------------------------------------------------
# Fusion candidates


def fusion_candidates(ctx: Ctx) -> list[Finding]:
    """Chains of consecutive memory-bound elementwise/normalisation kernels with short gaps."""
    if not ctx.has("kernel_chains"):
        return []
    n_min = int(ctx.th["fusion_min_kernels"])
    where = f"kind = 'fusion' AND in_window AND kernels >= {n_min}"
    total, steps, ranks, _ = _per_step(
        ctx,
        f"SELECT rank, step, (end_ns - start_ns) - max_kernel_ns AS v FROM kernel_chains WHERE {where}",
    )
    rec = ctx.per_step(total)
    if not total or (ctx.pct(rec) or 0) < ctx.th["fusion_min_pct"]:
        return []
    stats = ctx.df(
        f"""SELECT count(*) AS chains, sum(kernels) AS kernels, min(kernels) AS shortest,
                   max(kernels) AS longest,
                   sum(end_ns - start_ns) AS span_ns, sum(busy_ns) AS busy_ns,
                   sum(end_ns - start_ns - busy_ns) AS gap_ns, sum(graph_kernels) AS graph_kernels,
                   median(busy_ns / kernels) AS median_kernel_ns
            FROM kernel_chains WHERE {where}"""
    ).iloc[0]
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
                GROUP BY names, kernels ORDER BY recoverable_ns DESC, kernels DESC""",
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
        Finding(
            id="fusion-candidates",
            title="Chains of unfused elementwise/normalisation kernels",
            kind="performance",
            severity=ctx.severity(rec),
            summary=f"{int(stats['chains'])} chains of {int(stats['shortest'])} to {int(stats['longest'])} "
            f"consecutive memory-bound kernels ({per_step_kernels:.0f} launches per affected rank and step) "
            f"run {float(stats['busy_ns']) / max(n_win, 1) / 1e6:.3f} ms per affected rank and step; "
            f"fusing each chain into one kernel saves up to {rec / 1e6:.3f} ms per step "
            f"({ctx.pct(rec)} % of the mean step).",
            ranks=ranks,
            steps=steps,
            recoverable_ns_per_step=rec,
            recoverable_pct=ctx.pct(rec),
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

# per attention sequence: the innermost emit_nvtx `aten::*softmax*` range holding the softmax
# kernel's launch, its first `sizes` list and the element size from the kernel name
_SCORE_SQL = """
WITH s AS (SELECT rank, step, softmax_correlation_id AS corr, softmax_elem_bytes AS elem
           FROM kernel_chains WHERE {where}),
l AS (SELECT s.*, a.start_ns AS launch_ns, a.tid FROM s
      JOIN cuda_api a ON a.rank = s.rank AND a.correlation_id = s.corr),
r AS (SELECT l.rank, l.step, l.corr, l.elem, arg_min(n.text, n.end_ns - n.start_ns) AS text
      FROM l JOIN nvtx n ON n.rank = l.rank AND n.tid = l.tid AND n.start_ns <= l.launch_ns
                        AND n.end_ns >= l.launch_ns
      WHERE regexp_matches(n.text, '^aten::_?softmax') AND contains(n.text, 'sizes = [[')
      GROUP BY ALL),
d AS (SELECT *, list_transform(string_split(regexp_extract(text, 'sizes = \\[\\[([0-9, ]+)\\]', 1), ', '),
                               x -> TRY_CAST(x AS BIGINT)) AS dims FROM r)
SELECT rank, step, regexp_extract(text, '^([^,]+)', 1) AS op, dims, elem AS elem_bytes,
       list_reduce(dims, (a, b) -> a * b) * elem AS score_bytes
FROM d WHERE len(dims) >= 2
"""


def _score_matrix(ctx: Ctx, where: str):
    """(evidence, largest score-matrix bytes, GPU memory bytes) when the trace has the shapes."""
    if not ctx.has("nvtx", "cuda_api"):
        return None, None, None
    sql = _SCORE_SQL.format(where=where)
    score = ctx.scalar(f"SELECT max(score_bytes) FROM ({sql})")
    if not score:
        return None, None, None
    mem = ctx.scalar("SELECT max(memory_bytes) FROM gpus") if ctx.has("gpus") else None
    ev = ctx.evidence(
        "score-matrix shapes",
        "Shape of each unfused softmax's input (the b x h x n x n score matrix) from the emit_nvtx "
        "range around its launch, and its size in bytes.",
        f"""SELECT op, dims, elem_bytes, score_bytes, count(*) AS softmaxes,
                   list(DISTINCT rank ORDER BY rank) AS ranks
            FROM ({sql}) GROUP BY ALL ORDER BY score_bytes DESC, op""",
    )
    return ev, int(score), (int(mem) if mem else None)


def unfused_attention(ctx: Ctx) -> list[Finding]:
    """GEMM -> softmax -> GEMM sequences on one stream: attention without a fused kernel."""
    if not ctx.has("kernel_chains"):
        return []
    where = "kind = 'attention' AND in_window"
    total, steps, ranks, _ = _per_step(
        ctx, f"SELECT rank, step, (end_ns - start_ns) - gemm_ns AS v FROM kernel_chains WHERE {where}"
    )
    rec = ctx.per_step(total)
    if not total or (ctx.pct(rec) or 0) < ctx.th["attention_min_pct"]:
        return []
    stats = ctx.df(
        f"""SELECT count(*) AS chains, sum(end_ns - start_ns) AS span_ns, sum(gemm_ns) AS gemm_ns,
                   sum(kernels) AS kernels FROM kernel_chains WHERE {where}"""
    ).iloc[0]
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
                       sum(end_ns - start_ns - gemm_ns) AS recoverable_ns, any_value(names) AS example
                FROM kernel_chains WHERE {where}
                GROUP BY softmax_name, kernels ORDER BY recoverable_ns DESC, softmax_name""",
        )
    ]
    n = int(stats["chains"])
    shapes, score, mem = _score_matrix(ctx, where)
    if shapes is not None:
        ev.append(shapes)
    per_rank_step = n / max(ctx.n_steps, 1) / max(ctx.n_ranks, 1)
    return [
        Finding(
            id="unfused-attention",
            title="Attention runs as batched GEMM -> softmax -> batched GEMM (no fused kernel)",
            kind="performance",
            severity=ctx.severity(rec),
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
            recoverable_pct=ctx.pct(rec),
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
                "score_matrix_note": "largest b*h*n^2*bytes over the softmaxes, from the shapes PyTorch's "
                "emit_nvtx(record_shapes=True) writes into the NVTX range around the launch and the "
                "element size in the softmax kernel's name"
                if score
                else "b*h*n^2*bytes needs the softmax's input shape: profile with "
                "torch.autograd.profiler.emit_nvtx(record_shapes=True); the timeline has none",
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
# GEMM precision

_TENSOR_ARCHS = ("volta", "turing", "ampere", "ada", "hopper", "blackwell", "blackwell-consumer")
_ARCH_FAMILY = {"blackwell": ("blackwell", "blackwell-consumer")}


def _ratios(ctx: Ctx) -> tuple[dict[int, dict], str, list[str]]:
    """Per rank: fp32/tf32 gain factors toward the 16-bit tensor peak, how they were found.

    Known GPU: 1 - peak_fp32 / peak_16 (and tf32). Unknown GPU: the range over the table's NVIDIA
    models of the architectures its kernel names run on; the upper end is the bound."""
    peaks = gpus.rank_peaks(ctx.con)
    fams = ctx.df(f"SELECT {gpus.families_sql()} FROM (SELECT DISTINCT name FROM kernel_summary)")
    fits = set(gpus.ARCHS)
    seen = []
    for fam, _pattern, archs in gpus.KERNEL_FAMILIES:
        if len(fams) and bool(fams.at[0, f"fam_{fam}"]):
            fits &= set(archs)
            seen.append(fam)
    table = gpus.table()
    cand_archs = {a for f in fits for a in _ARCH_FAMILY.get(f, (f,))} if seen else set()
    cand = table[table["arch"].isin(cand_archs) & table["model"].str.startswith(("NVIDIA", "Tesla"))]
    out: dict[int, dict] = {}
    source = "table"
    models: list[str] = []
    for rec in peaks.to_dict("records"):
        fp32, tf32 = rec.get("peak_fp32_tflops"), rec.get("peak_tf32_tflops")
        p16 = rec.get("peak_bf16_tflops") or rec.get("peak_fp16_tflops")
        if fp32 and p16 and not pd.isna(fp32) and not pd.isna(p16):
            tf = 1 - float(tf32) / float(p16) if tf32 and not pd.isna(tf32) else None
            out[int(rec["rank"])] = {
                "fp32": 1 - float(fp32) / float(p16),
                "fp32_low": 1 - float(fp32) / float(p16),
                "tf32": tf,
                "model": rec["model"],
            }
            models.append(str(rec["model"]))
            continue
        if cand.empty:
            continue
        p = cand["bf16"].fillna(cand["fp16"])
        g32 = 1 - cand["fp32"] / p
        gtf = (1 - cand["tf32"] / p).dropna()
        out[int(rec["rank"])] = {
            "fp32": float(g32.max()),
            "fp32_low": float(g32.min()),
            "tf32": float(gtf.max()) if len(gtf) else None,
            "model": None,
        }
        source = "kernel-name architectures (" + "/".join(seen) + f": {', '.join(sorted(cand_archs))})"
        models = sorted(set(cand["model"]))
    return out, source, sorted(set(models))


def gemm_precision(ctx: Ctx) -> list[Finding]:
    """GEMMs in FP32 (CUDA cores) or TF32 on GPUs whose tensor cores run bf16/fp16 much faster."""
    if not ctx.has("kernel_summary", "gemm_precision"):
        return []
    per = ctx.df(
        """SELECT rank, gemm_precision(name) AS precision, sum(total_ns) AS ns, sum(instances) AS n
           FROM kernel_summary WHERE subcategory = 'gemm' GROUP BY 1, 2"""
    )
    slow = per[per["precision"].isin(["fp32", "tf32"])]
    if slow.empty:
        return []
    ratios, source, models = _ratios(ctx)
    if not ratios:
        return []
    gain = []
    for r in slow.to_dict("records"):
        f = ratios.get(int(r["rank"]), {}).get(r["precision"])
        gain.append(float(r["ns"]) * f if f else 0.0)
    slow = slow.assign(gain=gain)
    by_rank = slow.groupby("rank")["gain"].sum()
    rec = ctx.per_step(float(by_rank.max()))
    if not rec or (ctx.pct(rec) or 0) < ctx.th["precision_min_pct"]:
        return []
    low_rank = {
        rk: sum(
            float(r["ns"])
            * (ratios[rk]["fp32_low"] if r["precision"] == "fp32" else (ratios[rk]["tf32"] or 0))
            for r in slow[slow["rank"] == rk].to_dict("records")
        )
        for rk in by_rank.index
    }
    low = ctx.per_step(max(low_rank.values()))
    tot = per.groupby("precision", dropna=False)["ns"].sum()
    all_gemm = float(per["ns"].sum())
    fp32_ns, tf32_ns = float(tot.get("fp32", 0.0)), float(tot.get("tf32", 0.0))
    share = round(100.0 * (fp32_ns + tf32_ns) / all_gemm, 1) if all_gemm else None
    known = all(v["model"] for v in ratios.values())
    ev = [
        ctx.evidence(
            "GEMMs by precision",
            "GEMM kernels (name rules: subcategory gemm) by the precision their names state "
            "(gemm_precision), all ranks, whole capture (kernel_summary).",
            """SELECT gemm_precision(name) AS precision, name, sum(instances) AS launches,
                      sum(total_ns) AS total_ns, round(avg(avg_ns), 1) AS avg_ns,
                      list(DISTINCT rank ORDER BY rank) AS ranks
               FROM kernel_summary WHERE subcategory = 'gemm'
               GROUP BY 1, 2 ORDER BY precision IN ('fp32', 'tf32') DESC, total_ns DESC, name""",
        )
    ]
    what = "FP32 (CUDA-core FFMA, no TF32)" if fp32_ns >= tf32_ns else "TF32"
    f = next(iter(ratios.values()))
    return [
        Finding(
            id="gemm-precision",
            title=f"GEMMs run in {what} on a GPU with 16-bit tensor cores",
            kind="performance",
            severity=ctx.severity(rec),
            summary=f"{share} % of GEMM time is FP32/TF32 ({fp32_ns / 1e6:.3f} ms FP32, "
            f"{tf32_ns / 1e6:.3f} ms "
            f"TF32 over all ranks). At the 16-bit tensor-core dense peak the same GEMMs would take up to "
            f"{rec / 1e6:.3f} ms less per step ({ctx.pct(rec)} % of the mean step)"
            + ("" if known else f"; GPU model unknown, {low / 1e6:.3f} ms on the least favourable candidate")
            + ".",
            ranks=sorted(int(r) for r in by_rank[by_rank > 0].index),
            steps=[],
            recoverable_ns_per_step=rec,
            recoverable_pct=ctx.pct(rec),
            recoverable_method="worst rank's FP32 GEMM time x (1 - fp32 / bf16 dense peak) + TF32 GEMM time "
            "x (1 - tf32 / bf16 peak), / steps: the GEMMs at the same fraction of the 16-bit tensor peak "
            "(data/gpus.csv) as now of theirs; with the GPU unknown, the most favourable model of the "
            "architectures its kernel names run on (the bound), the least favourable in "
            "metrics.recoverable_ns_per_step_low",
            metrics={
                "fp32_gemm_ns_total": int(fp32_ns),
                "tf32_gemm_ns_total": int(tf32_ns),
                "gemm_ns_total": int(all_gemm),
                "fp32_tf32_share_of_gemm_pct": share,
                "gain_factor_fp32": round(f["fp32"], 4),
                "gain_factor_fp32_low": round(f["fp32_low"], 4),
                "gain_factor_tf32": None if f["tf32"] is None else round(f["tf32"], 4),
                "peak_source": source,
                "gpu_models": models,
                "recoverable_ns_per_step_low": low,
                **step_metrics(ctx, [], rec, "GEMM precision is the same in every step: not listed"),
            },
            evidence=ev,
            signals=[
                Signal(
                    "GPU peaks",
                    ", ".join(models[:6]) + (" ..." if len(models) > 6 else ""),
                    "",
                    "supports" if known else "neutral",
                    f"dense peaks from {source}"
                    + ("" if known else ": pass --gpu NAME for one model's bound"),
                ),
                Signal(
                    "precision source",
                    "kernel names",
                    "",
                    "neutral",
                    "cuBLAS/xmma names state input/compute types (ffma = CUDA-core FP32, tf32/s1688 = "
                    "TF32); names without a marker (nvjet) are not counted",
                ),
            ],
            fixes=[
                Fix(
                    "Run the model under torch.autocast(dtype=torch.bfloat16) (or keep weights in bf16)",
                    "8-bit mantissa: validate accuracy/convergence; keep reductions, softmax and the "
                    "loss in FP32 (autocast does); fp16 instead of bf16 needs loss scaling",
                ),
                Fix(
                    "At least allow TF32: torch.backends.cuda.matmul.allow_tf32 = True / "
                    "torch.set_float32_matmul_precision('high')",
                    "10-bit mantissa in the products (FP32 accumulate): usually harmless for training, "
                    "not for code that needs full FP32 (solvers, some losses); about half the bf16 rate",
                ),
            ],
        )
    ]


# ------------------------------------------------------------------------------------------------
# CUDA-graph coverage and candidates


def cuda_graph_candidates(ctx: Ctx) -> list[Finding]:
    """Launch-bound regions outside CUDA graphs, with the job's graph coverage as context."""
    if not ctx.has("graph_candidates", "graph_coverage"):
        return []
    n_min = int(ctx.th["graph_candidate_min_kernels"])
    where = f"kernels >= {n_min}"
    total, steps, ranks, _ = _per_step(
        ctx, f"SELECT rank, step, idle_ns AS v FROM graph_candidates WHERE {where}"
    )
    rec = ctx.per_step(total)
    if not total or (ctx.pct(rec) or 0) < ctx.th["graph_candidate_min_pct"]:
        return []
    cov = ctx.df(
        """SELECT sum(kernels) AS kernels, sum(graph_kernels) AS graph_kernels, sum(kernel_ns) AS kernel_ns,
                  sum(graph_kernel_ns) AS graph_kernel_ns FROM graph_coverage"""
    ).iloc[0]
    launches = (
        ctx.scalar(
            "SELECT coalesce(sum(calls), 0) FROM api_summary "
            "WHERE regexp_matches(name, '^cu(da)?GraphLaunch')"
        )
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
    stats = ctx.df(
        f"""SELECT count(*) AS regions, sum(kernels) AS kernels, sum(short_kernels) AS short_kernels,
                   sum(busy_ns) AS busy_ns, sum(idle_ns) AS idle_ns, max(streams) AS streams
            FROM graph_candidates WHERE {where}"""
    ).iloc[0]
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
        Finding(
            id="cuda-graph-candidates",
            title="Launch-bound kernel regions outside CUDA graphs",
            kind="performance",
            severity=ctx.severity(rec),
            summary=f"{int(stats['regions'])} regions of >= {n_min} kernels launched one by one keep the GPU "
            f"idle {rec / 1e6:.3f} ms per step ({ctx.pct(rec)} % of the mean step) between kernels; "
            f"CUDA graphs cover {launch_pct} % of the kernels and {time_pct} % of kernel time "
            f"({launches} graph launches).",
            ranks=ranks,
            steps=steps,
            recoverable_ns_per_step=rec,
            recoverable_pct=ctx.pct(rec),
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
