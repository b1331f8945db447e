"""Roofline evidence from recorded shapes: the PyTorch ops (queries/hfu/op_flops.sql) that launched a
finding's kernels, with their achieved TFLOP/s against the GPU's dense peak for their dtype and
their arithmetic intensity against the GPU's ridge point.

Why: a kernel name says what kind of kernel ran, not how much work it was given. A small-grid GEMM
with a tiny M x N is genuinely small work (batch or fuse it), one with a large output ran big tiles
(a tile / split-K choice); an attention op far below its peak on long sequences is worth a better
fused kernel, one near it is not. The shapes (Kineto record_shapes) give that work; the peaks and
memory bandwidth come from the peaks table (gpus.rank_peak_rows). Where the trace recorded no
shapes, or the GPU or the dtype's peak is unknown, the numbers are NULL, never guessed.

Used by the low-occupancy (rules/low_occupancy.py), dominant-kernel (rules/dominant_kernel.py) and
unfused-attention (rules/unfused_attention.py) findings; gemm-precision and unaligned-gemm read
op_flops themselves (rules/gemm_precision.py, rules/unaligned_gemm.py).
"""

from __future__ import annotations

import math
from typing import Any

from .. import gpus
from .base import Ctx, Evidence, Signal

#: Output tile edge used to count how many thread blocks a GEMM's output could fill: 128 x 128 is
#: the smallest tile the tensor-core GEMM libraries favour for large problems (cuBLAS, CUTLASS).
TILE = 128
#: The shallowest K slice a split-K (or stream-K) GEMM is credited with: a GEMM whose output tiles
#: times ceil(K / 256) reach the SM count can fill the GPU by splitting K.
K_SLICE = 256


def _num(value: Any) -> str:
    """A DOUBLE SQL literal; NULL for None / NaN (an unknown peak stays unknown)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "NULL::DOUBLE"
    return f"{float(value)!r}::DOUBLE"


def peaks_sql(ctx: Ctx) -> str:
    """SQL: one row per rank with its GPU's dense peaks (TFLOP/s) for the op dtypes and its memory
    bandwidth (GB/s), as a VALUES list so the evidence SQL re-runs as is (gpus.rank_peak_rows:
    the peaks table, --gpu, or the derivation from the device's SMs and clock)."""
    cols = ("peak_fp32_tflops", "peak_tf32_tflops", "peak_bf16_tflops", "peak_fp16_tflops", "peak_fp8_tflops")
    vals = [
        "(" + ", ".join([str(int(r["rank"]))] + [_num(r[c]) for c in cols] + [_num(r["mem_bw_gbs"])]) + ")"
        for r in gpus.rank_peak_rows(ctx.con)
    ]
    names = "rank, fp32, tf32, bf16, fp16, fp8, mem_bw_gbs"
    if not vals:
        nulls = ", ".join(["NULL::INTEGER"] + ["NULL::DOUBLE"] * 6)
        return f"SELECT * FROM (VALUES ({nulls})) p({names}) WHERE false"
    return f"SELECT * FROM (VALUES {', '.join(vals)}) p({names})"


def _precision(ctx: Ctx, dtype: str, name: str) -> str:
    """SQL: the precision whose peak bounds an op: its input dtype (bf16, fp16, fp8); float inputs
    run FP32 or TF32 (allow_tf32 decides): the type its longest kernel's name states
    (gemm_precision: tf32, or fp32 for ffma/sgemm), else NULL (unknown, never guessed)."""
    by_name = (
        f"CASE gemm_precision({name}) WHEN 'tf32' THEN 'tf32' WHEN 'fp32' THEN 'fp32' END"
        if ctx.has("gemm_precision")
        else "NULL"
    )
    return (
        f"CASE WHEN regexp_matches({dtype}, '(?i)float8') THEN 'fp8' "
        f"WHEN regexp_matches({dtype}, '(?i)bfloat16') THEN 'bf16' "
        f"WHEN regexp_matches({dtype}, '(?i)half') THEN 'fp16' "
        f"WHEN {dtype} = 'float' THEN {by_name} END"
    )


#: SQL over an op_flops row `o`: attention's q as [B, H, L, D] (bhld: aten::scaled_dot_product_*)
#: or [B, L, H, D] (blhd: aten::_flash/_efficient_attention_*); the backward ops list grad_out first.
_Q = "o.input_dims[CASE WHEN o.op LIKE '%backward' THEN 2 ELSE 1 END]"
_BLHD = "regexp_matches(o.op, '^aten::_(flash|efficient)_attention_')"
_IS_Q = f"o.kind = 'attention' AND len({_Q}) = 4"
_ATTN_DIMS = f"""CASE WHEN {_IS_Q} THEN {_Q}[1] END AS attn_b,
       CASE WHEN {_IS_Q} THEN CASE WHEN {_BLHD} THEN {_Q}[3] ELSE {_Q}[2] END END AS attn_h,
       CASE WHEN {_IS_Q} THEN CASE WHEN {_BLHD} THEN {_Q}[2] ELSE {_Q}[3] END END AS attn_l,
       CASE WHEN {_IS_Q} THEN {_Q}[4] END AS attn_d"""


def ops_sql(ctx: Ctx, kernels_sql: str) -> str:
    """SQL: the op_flops ops that launched the kernels of `kernels_sql` (columns rank,
    correlation_id, name, duration_ns), grouped by op, dtype and shape: the op's whole kernel time
    and FLOPs (op_flops), its achieved TFLOP/s, the dense peak of its precision on its rank's GPU,
    arithmetic intensity, the ridge point (peak / memory bandwidth), the roofline's attainable
    TFLOP/s (min(peak, intensity x bandwidth)) and the achieved share of it; tiles_128 (GEMMs:
    batch x ceil(M/128) x ceil(N/128), the output tiles a 128 x 128 kernel would launch) and
    split_k_tiles (x ceil(K/256): with K split too) against the SM count. A launch belongs to the
    leaf op on its thread whose host span holds its cuda_api call (as op_flops counts kernels). No
    SQL comments: evidence SQL is folded onto one line."""
    sm_default = int(ctx.th.get("sm_count_default") or 0)
    prec = _precision(ctx, "any_value(dtype)", "arg_max(name, (duration_ns, name))")
    roof = "least(any_value(peak_tflops), sum(flops) / sum(bytes) * any_value(mem_bw_gbs) / 1e3)"
    return f"""
        WITH peaks AS ({peaks_sql(ctx)}),
        sm AS (SELECT rank, max(sm_count) AS sm FROM gpus GROUP BY rank),
        sk AS ({kernels_sql}),
        ko AS (
            SELECT sk.rank, sk.name, sk.duration_ns, o.tid, o.start_ns, o.op, o.kind, o.dtype,
                   o.batch, o.m, o.n, o.k, o.causal, o.flops, o.bytes, o.kernel_ns, {_ATTN_DIMS}
            FROM sk JOIN cuda_api a ON a.rank = sk.rank AND a.correlation_id = sk.correlation_id
            JOIN op_flops o ON o.rank = sk.rank AND o.tid = a.tid
                AND a.start_ns BETWEEN o.start_ns AND o.end_ns
        ),
        ops AS (
            SELECT rank, tid, start_ns, any_value(op) AS op, any_value(kind) AS kind,
                   any_value(dtype) AS dtype, any_value(batch) AS batch, any_value(m) AS m,
                   any_value(n) AS n, any_value(k) AS k, any_value(attn_b) AS attn_b,
                   any_value(attn_h) AS attn_h, any_value(attn_l) AS attn_l, any_value(attn_d) AS attn_d,
                   any_value(causal) AS causal, any_value(flops) AS flops, any_value(bytes) AS bytes,
                   any_value(kernel_ns) AS op_kernel_ns, count(*) AS launches,
                   sum(duration_ns) AS kernel_ns, arg_max(name, (duration_ns, name)) AS kernel,
                   {prec} AS peak_precision
            FROM ko GROUP BY rank, tid, start_ns
        ),
        pk AS (
            SELECT ops.*, CASE ops.peak_precision WHEN 'fp8' THEN p.fp8 WHEN 'bf16' THEN p.bf16
                              WHEN 'fp16' THEN p.fp16 WHEN 'tf32' THEN p.tf32 WHEN 'fp32' THEN p.fp32 END
                       AS peak_tflops, p.mem_bw_gbs,
                   coalesce(sm.sm, nullif({sm_default}, 0)) AS sm_count
            FROM ops LEFT JOIN peaks p ON p.rank = ops.rank LEFT JOIN sm ON sm.rank = ops.rank
        )
        SELECT op, kind, dtype, batch, m, n, k, attn_b, attn_h, attn_l, attn_d, causal, peak_precision,
               count(*) AS ops, sum(launches)::BIGINT AS launches, sum(kernel_ns)::BIGINT AS kernel_ns,
               sum(op_kernel_ns)::BIGINT AS op_kernel_ns, any_value(flops) AS flops_per_op,
               round(sum(flops) / sum(op_kernel_ns) / 1e3, 2) AS tflops_per_s,
               any_value(peak_tflops) AS peak_tflops,
               round(100.0 * sum(flops) / sum(op_kernel_ns) / 1e3 / any_value(peak_tflops), 1) AS pct_of_peak,
               round(sum(flops) / sum(bytes), 1) AS intensity,
               round(any_value(peak_tflops) * 1e3 / any_value(mem_bw_gbs), 1) AS ridge_flop_per_byte,
               round({roof}, 2) AS attainable_tflops,
               round(100.0 * sum(flops) / sum(op_kernel_ns) / 1e3 / {roof}, 1) AS pct_of_roofline,
               CASE WHEN kind = 'gemm' THEN coalesce(batch, 1) * ceil(m / {TILE}) * ceil(n / {TILE})
                    END::BIGINT AS tiles_128,
               CASE WHEN kind = 'gemm' THEN coalesce(batch, 1) * ceil(m / {TILE}) * ceil(n / {TILE})
                    * ceil(k / {K_SLICE}) END::BIGINT AS split_k_tiles,
               any_value(sm_count) AS sm_count,
               arg_max(kernel, (kernel_ns, kernel)) AS example_kernel,
               list(DISTINCT rank ORDER BY rank) AS ranks
        FROM pk GROUP BY op, kind, dtype, batch, m, n, k, attn_b, attn_h, attn_l, attn_d, causal,
                 peak_precision, peak_tflops, mem_bw_gbs, sm_count
        ORDER BY kernel_ns DESC, op, dtype, batch, m, n, k, attn_b, attn_h, attn_l, attn_d, causal,
                 peak_precision, peak_tflops"""


def has_shapes(ctx: Ctx, *needs: str) -> bool:
    """Whether the trace recorded op shapes (op_flops has a row) and the other tables `needs` exist:
    op_flops exists in every workspace, and a rule that joins millions of kernels to an empty
    op_flops (every nsys trace without shape NVTX) pays the join for nothing."""
    return ctx.has("op_flops", *needs) and bool(ctx.scalar("SELECT count(*) FROM (FROM op_flops LIMIT 1)"))


def op_evidence(ctx: Ctx, name: str, what: str, kernels_sql: str) -> tuple[Evidence, list[dict]] | None:
    """The evidence table of `ops_sql` and its rows (all of them, for the signals), or None when
    the trace recorded no shapes for these kernels (no op_flops, or no op around their launches)."""
    if not has_shapes(ctx, "cuda_api", "gpus"):
        return None  # no shapes recorded: nothing to read (and no peaks to resolve)
    sql = ops_sql(ctx, kernels_sql)
    rows = ctx.rows(sql)
    if not rows:
        return None
    ev = ctx.evidence(
        name,
        f"The PyTorch ops that launched {what} (Kineto record_shapes: op_flops, the leaf op around "
        "the launch on its thread), by op, dtype and shape (GEMM batch/M/N/K; attention "
        "B/H/L/D and causal): the op's achieved TFLOP/s (its FLOPs over all its kernels' time) "
        "against the GPU's dense peak for its precision (float inputs: the FP32/TF32 its kernel's "
        "name states, else unknown), arithmetic intensity (FLOP/byte) against the ridge point (peak / memory "
        "bandwidth), the roofline's attainable TFLOP/s and the share achieved; tiles_128: the "
        "128 x 128 output tiles of the GEMM, split_k_tiles: those x ceil(K / 256) (K split in slices "
        "of 256), against the SM count. NULL: not in the trace or the "
        "peaks table.",
        sql,
    )
    return ev, rows


def roofline_share(rows: list[dict]) -> tuple[float | None, float]:
    """(the kernels' time-weighted achieved share of the roofline in %, the op kernel time that
    share covers): sum over ops of their time at the roof / their time. None when no op has
    both FLOPs and a known roof."""
    known = [r for r in rows if r["pct_of_roofline"] is not None and r["op_kernel_ns"]]
    ns = math.fsum(float(r["op_kernel_ns"]) for r in known)
    if not ns:
        return None, 0.0
    at_roof = math.fsum(float(r["op_kernel_ns"]) * float(r["pct_of_roofline"]) / 100.0 for r in known)
    return round(100.0 * at_roof / ns, 1), ns


def roofline_signal(label: str, share: float, ns: float, whose: str, low: str, high: str) -> Signal:
    """The achieved share of the roofline as a signal: below 50 % supports a finding about the
    kernels (room left), from 80 % it is against it (only less work helps); `low` / `high` say what
    that means for this finding."""
    return Signal(
        label,
        share,
        "%",
        "supports" if share < 50 else "against" if share >= 80 else "neutral",
        f"{whose} over {ns / 1e6:.3f} ms of their kernel time against min(dense peak of their dtype, "
        "intensity x memory bandwidth)" + (f": {low}" if share < 50 else f": {high}" if share >= 80 else ""),
    )
