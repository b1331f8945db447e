"""Unfused attention: GEMM -> softmax -> GEMM sequences a fused attention kernel would replace, with
the score matrix's size where the trace recorded shapes.

Why: the kernels between the two GEMMs (softmax, masking, dropout) write and read the score matrix
through memory; a fused kernel keeps it on chip. Reads the stored chains (`kernel_chains`, kind
attention) and `attention_scores`; the recoverable time is an upper bound per step, worst rank per
step.
"""

from __future__ import annotations

import math

from ..store.query_layer import statements
from ._chains import per_step_worst
from ._common import step_metrics
from .base import Ctx, Finding, Fix, Signal
from .declare import Doc, Threshold, finding
from .op_roofline import op_evidence

SQL = statements("rules/unfused_attention")


def _score_matrix(ctx: Ctx):
    """(evidence, largest score-matrix bytes, its rank's GPU memory bytes, shape sources) when the
    trace has the softmaxes' shapes (queries/kernels/attention_scores.sql: Kineto record_shapes or
    emit_nvtx)."""
    if not ctx.has("attention_scores"):
        return None, None, None, []
    row = ctx.row(SQL["score_matrix_largest"])
    if not row.get("s"):
        return None, None, None, []
    mem = row["m"]
    ev = ctx.evidence(
        "score-matrix shapes",
        "Shape of each unfused softmax's input (the b x h x n x n score matrix) from the op that "
        "launched it (Kineto record_shapes, or the emit_nvtx range around the launch), its size in "
        "bytes and against the GPU's memory (attention_scores).",
        SQL["score_matrix_shapes"],
    )
    return ev, int(row["s"]), (int(mem) if mem else None), list(row["src"])


def _chain_gemm_shapes(ctx: Ctx, ev: list) -> list[Signal]:
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
        SQL["sequence_gemms"],
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


@finding(
    "unfused-attention",
    doc=Doc(
        what=(
            "GEMM -> softmax -> GEMM on one stream with only elementwise/dropout/copy kernels between "
            "(not log-softmax: that is the loss), forward or backward"
        ),
        source="`kernel_chains` (kind attention), `kernel_summary` (fused attention time as a signal)",
        recoverable=(
            "per step, worst rank's sum of span - the two GEMMs (softmax, masking and gaps that a fused "
            "kernel keeps on chip); >= `attention_min_pct`. The score-matrix size b·h·n²·bytes "
            "(`metrics.score_matrix_bytes`, and its share of the GPU's memory) comes from "
            "`attention_scores`: in PyTorch-profiler traces recorded with `record_shapes=True`, the "
            "first `Input Dims` and `Input type` of the innermost softmax op around the kernel's launch "
            "(`kineto_op_shapes`; the op whose `External id` the kernel carries); in nsys traces, the "
            "`sizes = [[b, h, n, n], ...]` that PyTorch's `emit_nvtx(record_shapes=True)` writes into "
            "the NVTX range around the softmax launch and the element size in the softmax kernel's "
            "name; against the rank's GPU memory; null without shapes (the note says how to record "
            "them). With recorded shapes, the ops that launched the sequences' GEMMs (evidence `shapes "
            "of the sequences' GEMMs`) and signal `sequence GEMMs below the ridge point`: the share of "
            "their kernel time whose op's FLOP/byte is below the GPU's ridge point (`supports` >= 50 %: "
            "memory bound on the score matrix; else `against`: compute bound, fusing saves less)"
        ),
    ),
    thresholds={
        "attention_min_pct": Threshold(
            1.0,
            (
                "report unfused attention (GEMM -> softmax -> GEMM) when it can recover >= this % of the "
                "mean step"
            ),
        ),
    },
    reads=("attention_scores", "gaps", "kernel_chains", "kernel_summary", "steps"),
)
def unfused_attention(ctx: Ctx) -> list[Finding]:
    """GEMM -> softmax -> GEMM sequences on one stream: attention without a fused kernel."""
    if not ctx.has("kernel_chains"):
        return []
    total, steps, ranks = per_step_worst(ctx, SQL["recoverable_per_rank_step"])
    rec = ctx.per_step(total)
    if not total or (ctx.pct(rec) or 0) < ctx.th["attention_min_pct"]:
        return []
    stats = ctx.row(SQL["sequence_totals"])
    fused = ctx.scalar(SQL["fused_attention_ns"]) if ctx.has("kernel_summary") else 0
    ev = [
        ctx.evidence(
            "unfused attention sequences",
            "GEMM, softmax, GEMM on one stream with only elementwise/dropout/copy kernels between "
            "(kernel_chains kind attention): the score matrix goes through GPU memory twice.",
            SQL["sequences_by_softmax"],
        )
    ]
    n = int(stats["chains"])
    shapes, score, mem, sources = _score_matrix(ctx)
    if shapes is not None:
        ev.append(shapes)
    gemm_signals = _chain_gemm_shapes(ctx, ev)
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
