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
from ..store.query_layer import statements
from .base import Ctx, Evidence, Signal

SQL = statements("rules/op_roofline")

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
    return SQL.sql("rank_peaks", rows=", ".join(vals)) if vals else SQL["no_rank_peaks"]


def _precision(ctx: Ctx, dtype: str, name: str) -> str:
    """SQL: the precision whose peak bounds an op: its input dtype (bf16, fp16, fp8); float inputs
    run FP32 or TF32 (allow_tf32 decides): the type its longest kernel's name states
    (gemm_precision: tf32, or fp32 for ffma/sgemm), else NULL (unknown, never guessed)."""
    by_name = SQL.sql("precision_by_kernel_name", kernel_name=name) if ctx.has("gemm_precision") else "NULL"
    return SQL.sql("op_precision", dtype=dtype, by_name=by_name)


#: SQL over an op_flops row `o`: attention's q as [B, H, L, D] (bhld: aten::scaled_dot_product_*)
#: or [B, L, H, D] (blhd: aten::_flash/_efficient_attention_*); the backward ops list grad_out first.
_Q = SQL["attn_q"]
_ATTN_DIMS = SQL.sql("attn_dims", q=_Q, is_q=SQL.sql("is_attn_q", q=_Q), blhd=SQL["attn_blhd"])


def ops_sql(ctx: Ctx, kernels_sql: str) -> str:
    """SQL: the op_flops ops that launched the kernels of `kernels_sql` (columns rank,
    correlation_id, name, duration_ns), grouped by op, dtype and shape: the op's whole kernel time
    and FLOPs (op_flops), its achieved TFLOP/s, the dense peak of its precision on its rank's GPU,
    arithmetic intensity, the ridge point (peak / memory bandwidth), the roofline's attainable
    TFLOP/s (min(peak, intensity x bandwidth)) and the achieved share of it; tiles_128 (GEMMs:
    batch x ceil(M/128) x ceil(N/128), the output tiles a 128 x 128 kernel would launch) and
    split_k_tiles (x ceil(K/256): with K split too) against the SM count. A launch belongs to the
    leaf op on its thread whose host span holds its cuda_api call (as op_flops counts kernels). The
    statement file's comment lines are not part of it: evidence SQL is folded onto one line."""
    sm_default = int(ctx.th.get("sm_count_default") or 0)
    prec = _precision(ctx, "any_value(dtype)", "arg_max(name, (duration_ns, name))")
    return SQL.sql(
        "ops",
        peaks=peaks_sql(ctx),
        kernels=kernels_sql,
        attn_dims=_ATTN_DIMS,
        prec=prec,
        sm_default=sm_default,
        roof=SQL["attainable_tflops"],
        tile=TILE,
        k_slice=K_SLICE,
    )


def has_shapes(ctx: Ctx, *needs: str) -> bool:
    """Whether the trace recorded op shapes (op_flops has a row) and the other tables `needs` exist:
    op_flops exists in every workspace, and a rule that joins millions of kernels to an empty
    op_flops (every nsys trace without shape NVTX) pays the join for nothing."""
    return ctx.has("op_flops", *needs) and bool(ctx.scalar(SQL["any_op_flops"]))


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
