"""FLOPs from shapes (queries/hfu/op_flops.sql) for the attention ops of the flash-attention family:
sliding-window / local attention (`window_size_left/right`), the causal mask when Lq != Lk, AMD aiter's
`mha_*` / `fmha_v3_*` forward and backward, vLLM's `_vllm_fa2_C` / `_vllm_fa3_C` builds, and the
reason (`flops_unknown`) where the recorded shapes cannot say.

Expected values are hand counts from the shapes and arguments written in each case (the keys each query
sees under flash-attn's rule: query i attends to keys [i + Lk - Lq - left, i + Lk - Lq + right],
flash-attn README). None of the shared real traces holds these ops (issue 52's measurement: only
aten SDPA / `_flash_attention_forward`, aiter's paged `mha_batch_prefill` and vLLM's
`unified_attention`), so the fixtures are small hand-written Kineto traces; on the shared H100 traces
the `_flash_attention_forward` calls, whose Concrete Inputs carry the window arguments empty, are
checked against a hand count.

vLLM's `_vllm_fa2_C::*` / `_vllm_fa3_C::*` ops reach `kineto_op_shapes` because the ingest keeps
their shapes (sources/kineto/duck_json.COMPUTE_OPS; tests/test_op_flops_more.py checks it).
"""

from __future__ import annotations

from pathlib import Path

from conftest import TRACES, ingested, requires_shared
from test_op_flops_more import _rows

from nsight_analyze.store import query_layer

BF16 = "c10::BFloat16"
OP_FLOPS_SQL = query_layer.query_path("op_flops")
UNMODELED = (
    "attention sinks, chunked attention or appended KV (sink_size, attention_chunk, k_new, qv): "
    "keys per query not modeled"
)
VARLEN_ELSEWHERE = "varlen attention: KV lengths from seqused_k / block_table, not recorded"
PAGED = "paged KV cache: per-sequence KV lengths not recorded"


def _conc(n: int, **at: str) -> list[str]:
    """Concrete Inputs of n arguments: '' (a tensor or an absent optional) except those given by
    position (`p5='True'`)."""
    out = [""] * n
    for key, value in at.items():
        out[int(key[1:])] = value
    return out


# ---------------------------------------------------------------------------------------------
# flash-attn 2 and aten: sliding window, causal with Lq != Lk
# ---------------------------------------------------------------------------------------------
def test_flash_attn_windows_and_causal_alignment(tmp_path: Path, fast_path) -> None:
    fwd = "flash_attn::_flash_attn_forward"  # (q, k, v, dropout_p, softmax_scale, causal, wl, wr, ...)
    qkv = [[2, 8, 4, 64]] * 3  # B 2, L 8, H 4, D 64 (blhd)
    fwd_types = [BF16] * 3 + ["Scalar"] * 8
    fwd_dims = [*qkv, *[[]] * 8]
    ops = [
        # window (3, 0), not causal: query i sees keys i-3..i: 1, 2, 3, 4, 4, 4, 4, 4 = 26 keys;
        # 2 * B * H * keys * (D_qk + D_v) = 2 * 2 * 4 * 26 * 128
        (fwd, fwd_dims, fwd_types, _conc(11, p3="0.0", p4="0.125", p5="False", p6="3", p7="0")),
        # causal with window (3, -1): flash-attn sets the right side to 0, the same 26 keys
        (fwd, fwd_dims, fwd_types, _conc(11, p3="0.0", p4="0.125", p5="True", p6="3", p7="-1")),
        # window_size_left 100 >= Lk 8 is unbounded (flash_api.cpp): every key, 8 * 8 = 64 per head
        (fwd, fwd_dims, fwd_types, _conc(11, p3="0.0", p4="0.125", p5="False", p6="100", p7="-1")),
        # causal, Lq 4 < Lk 10, no window: bottom-right, query x sees x + 6 keys; the area
        # Lq * Lk - Lq^2 / 2 = 40 - 8 = 32 (FlashAttention-3's benchmark count; the old 0.5 * Lq * Lk = 20
        # was wrong for Lq != Lk): 2 * 1 * 4 * 32 * 128
        (fwd, [[1, 4, 4, 64], [1, 10, 4, 64], [1, 10, 4, 64], *[[]] * 8], fwd_types,
         _conc(11, p3="0.0", p4="0.125", p5="True", p6="-1", p7="-1")),
        # varlen (q, k, v, cu_q, cu_k, max_q, max_k, dropout, scale, causal, wl, wr, ...): 3 sequences of
        # 16 (T = 48 = 3 * 16), H 2, D 32, window (4, 4): query i sees [i-4, i+4] within 0..15:
        # 5+6+7+8 + 8*9 + 8+7+6+5 = 124 keys per sequence and head: 2 * 3 * 2 * 124 * 64
        ("flash_attn::_flash_attn_varlen_forward", [[48, 2, 32]] * 3 + [[4], [4]] + [[]] * 10,
         [BF16] * 3 + ["int", "int"] + ["Scalar"] * 10,
         _conc(15, p5="16", p6="16", p7="0.0", p8="0.17", p9="False", p10="4", p11="4")),
        # backward (dout, q, k, v, out, lse, dq, dk, dv, dropout, scale, causal, wl, wr, ...): causal,
        # window (2, 0), L 6: keys 1, 2, 3, 3, 3, 3 = 15; 2.5 * 2 * B 1 * H 2 * 15 * 32. dq, dk, dv
        # are passed in, so bytes = the inputs: 8 tensors of 1*6*2*16 bf16 + lse [1, 2, 6] float
        ("flash_attn::_flash_attn_backward",
         [[1, 6, 2, 16]] * 5 + [[1, 2, 6]] + [[1, 6, 2, 16]] * 3 + [[]] * 9,
         [BF16] * 5 + ["float"] + [BF16] * 3 + ["Scalar"] * 9,
         _conc(18, p9="0.0", p10="0.25", p11="True", p12="2", p13="0")),
        # aten::_flash_attention_forward(q, k, v, cum_q, cum_k, max_q, max_k, dropout, is_causal,
        # return_debug_mask, *, scale, window_size_left 11, window_size_right 12): L 8, window (2, 1):
        # query i sees [i-2, i+1] within 0..7: 2, 3, 4, 4, 4, 4, 4, 3 = 28; 2 * 1 * 2 * 28 * 32
        ("aten::_flash_attention_forward", [[1, 8, 2, 16]] * 3 + [[]] * 12, [BF16] * 3 + ["Scalar"] * 12,
         _conc(15, p5="8", p6="8", p7="0.", p8="False", p9="False", p10="0.25", p11="2", p12="1")),
        # one query, causal: flash-attn drops the mask (flash_api.cpp: seqlen_q == 1 is not causal), the
        # query sees all 100 keys: q [4, 1, 8, 64], k, v [4, 100, 8, 64]: 2 * 4 * 8 * 100 * 128
        (fwd, [[4, 1, 8, 64], [4, 100, 8, 64], [4, 100, 8, 64], *[[]] * 8], fwd_types,
         _conc(11, p3="0.0", p4="0.125", p5="True", p6="-1", p7="-1")),
        # efficient attention (q, k, v, bias, cu_q, cu_k, max_q, max_k, dropout, custom_mask_type, ...),
        # q [1, 4, 2, 16], k, v [1, 10, 2, 16]: custom_mask_type 1 (causal from the top left): query x
        # sees x keys, area min(4, 10)^2 / 2 = 8: 2 * 1 * 2 * 8 * 32
        ("aten::_efficient_attention_forward", [[1, 4, 2, 16], [1, 10, 2, 16], [1, 10, 2, 16]] + [[]] * 11,
         [BF16] * 3 + ["Scalar"] * 11, _conc(14, p8="0.", p9="1", p10="False", p11="0.25")),
        # custom_mask_type 2 (from the bottom right): 4 * 10 - 4^2 / 2 = 32: 2 * 1 * 2 * 32 * 32
        ("aten::_efficient_attention_forward", [[1, 4, 2, 16], [1, 10, 2, 16], [1, 10, 2, 16]] + [[]] * 11,
         [BF16] * 3 + ["Scalar"] * 11, _conc(14, p8="0.", p9="2", p10="False", p11="0.25")),
        # SDPA (q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa) [B, H, L, D]: is_causal is
        # top-left in PyTorch: q [1, 2, 4, 16], k, v [1, 2, 10, 16]: area 8: 2 * 1 * 2 * 8 * 32
        ("aten::scaled_dot_product_attention", [[1, 2, 4, 16], [1, 2, 10, 16], [1, 2, 10, 16]] + [[]] * 5,
         [BF16] * 3 + [""] + ["Scalar"] * 4, ["", "", "", "", "0.", "True", "0.25", "False"]),
    ]  # fmt: skip
    rows = _rows(tmp_path, ops)
    assert [r[1] for r in rows] == ["attention"] * 11
    assert rows[0][2] == 2 * 2 * 4 * 26 * 128 and rows[0][4] is False
    assert rows[1][2] == 2 * 2 * 4 * 26 * 128 and rows[1][4] is True
    assert rows[2][2] == 2 * 2 * 4 * 64 * 128
    assert rows[3][2] == 2 * 1 * 4 * 32 * 128
    assert rows[4][2] == 2 * 3 * 2 * 124 * 64
    assert rows[5][2] == 2.5 * 2 * 1 * 2 * 15 * 32
    assert rows[5][3] == 8 * (1 * 6 * 2 * 16) * 2 + (1 * 2 * 6) * 4
    assert rows[6][2] == 2 * 1 * 2 * 28 * 32
    assert rows[7][2] == 2 * 4 * 8 * 100 * 128 and rows[7][4] is True
    assert rows[8][2] == 2 * 1 * 2 * 8 * 32 and rows[9][2] == 2 * 1 * 2 * 32 * 32
    assert rows[8][4] is True and rows[9][4] is True
    assert rows[10][2] == 2 * 1 * 2 * 8 * 32
    assert all(r[6] is None for r in rows) and all(r[5] == 1 for r in rows)


# ---------------------------------------------------------------------------------------------
# aiter (ROCm): mha_fwd / fmha_v3_fwd / mha_varlen_fwd / mha_bwd / fmha_v3_bwd / mha_varlen_bwd
# ---------------------------------------------------------------------------------------------
def test_aiter_mha_forward_and_backward(tmp_path: Path, fast_path) -> None:
    lse = ["float"]
    ops = [
        # mha_fwd(q, k, v, dropout_p, softmax_scale, is_causal, wl, wr, sink_size, return_lse,
        # return_randval, cu_seqlens_q, cu_seqlens_kv, out, ...): q, k, v [B 2, L 128, H 8, D 128],
        # causal, no window: half of 128 * 128 per head: 2 * 2 * 8 * (128 * 128 / 2) * 256
        # (TraceLens's SDPA.flops_func, perf_model.py, gives the same: B*H * 2*N_Q*N_KV*(d_qk + d_v) / 2)
        ("aiter::mha_fwd", [[2, 128, 8, 128]] * 3 + [[]] * 18, [BF16] * 3 + ["Scalar"] * 18,
         _conc(21, p3="0.0", p4="0.088", p5="True", p6="-1", p7="-1", p8="0", p9="True", p10="False")),
        # the same with sink_size 4: the sink keys are outside the formula, unknown
        ("aiter::mha_fwd", [[2, 128, 8, 128]] * 3 + [[]] * 18, [BF16] * 3 + ["Scalar"] * 18,
         _conc(21, p3="0.0", p4="0.088", p5="True", p6="-1", p7="-1", p8="4", p9="True", p10="False")),
        # fmha_v3_fwd(q, k, v, dropout_p, softmax_scale, is_causal, wl, wr, ...): q [1, 64, 4, 64],
        # k, v [1, 64, 1, 64] (GQA: q's 4 heads count), window (16, 0): query i sees min(i, 16) + 1 keys:
        # (1 + ... + 16) + 48 * 17 = 136 + 816 = 952; 2 * 1 * 4 * 952 * 128
        ("aiter::fmha_v3_fwd", [[1, 64, 4, 64], [1, 64, 1, 64], [1, 64, 1, 64]] + [[]] * 15,
         [BF16] * 3 + ["Scalar"] * 15,
         _conc(18, p3="0.0", p4="0.125", p5="False", p6="16", p7="0", p8="True", p9="False", p10="1")),
        # mha_varlen_fwd(q, k, v, cu_q, cu_k, max_q, max_k, min_q, dropout, scale, softcap, zero_tensors,
        # is_causal, wl, wr, sink_size, ...): 2 sequences, q [64 = 2 * 32, 8, 64], k, v [128 = 2 * 64, 8,
        # 64], causal (bottom-right, Lq 32 < Lk 64): area 32 * 64 - 32^2 / 2 = 1536 per sequence and head;
        # 2 * 2 * 8 * 1536 * 128
        ("aiter::mha_varlen_fwd", [[64, 8, 64], [128, 8, 64], [128, 8, 64], [3], [3]] + [[]] * 24,
         [BF16] * 3 + ["int", "int"] + ["Scalar"] * 24,
         _conc(29, p5="32", p6="64", p7="32", p8="0.0", p9="0.125", p10="0.0", p11="False", p12="True",
               p13="-1", p14="-1", p15="0", p16="True", p17="False")),
        # the same with a block_table (argument 19): K and V are paged, their lengths unknown
        ("aiter::mha_varlen_fwd",
         [[64, 8, 64], [128, 8, 64], [128, 8, 64], [3], [3]] + [[]] * 14 + [[2, 4]] + [[]] * 9,
         [BF16] * 3 + ["int", "int"] + ["Scalar"] * 14 + ["int"] + ["Scalar"] * 9,
         _conc(29, p5="32", p6="64", p7="32", p8="0.0", p9="0.125", p10="0.0", p11="False", p12="True",
               p13="-1", p14="-1", p15="0", p16="True", p17="False")),
        # mha_bwd(dout, q, k, v, out, lse, dropout, scale, is_causal, wl, wr, deterministic, dq, ...):
        # [1, 32, 2, 64], not causal: 2.5 * 2 * 1 * 2 * 32 * 32 * 128; dq, dk, dv not passed: bytes
        # = dout, q, k, v, out + lse [1, 2, 32] float + dq, dk, dv as q, k, v
        ("aiter::mha_bwd", [[1, 32, 2, 64]] * 5 + [[1, 2, 32]] + [[]] * 16,
         [BF16] * 5 + lse + ["Scalar"] * 16,
         _conc(22, p6="0.0", p7="0.125", p8="False", p9="-1", p10="-1", p11="False")),
        # fmha_v3_bwd(..., is_causal 8, ...): causal square: 2.5 * 2 * 1 * 2 * (32 * 32 / 2) * 128
        ("aiter::fmha_v3_bwd", [[1, 32, 2, 64]] * 5 + [[1, 2, 32]] + [[]] * 14,
         [BF16] * 5 + lse + ["Scalar"] * 14,
         _conc(20, p6="0.0", p7="0.125", p8="True", p9="-1", p10="-1", p11="False", p12="True", p13="1")),
        # mha_varlen_bwd(dout, q, k, v, out, lse, cu_q, cu_k, max_q, max_k, dropout, scale, zero_tensors,
        # is_causal, wl, wr, ...): 2 sequences of 32, H 2, D 32, window (8, 8): query i sees
        # [i-8, i+8] within 0..31: (9 + ... + 16) + 16 * 17 + (16 + ... + 9) = 100 + 272 + 100 = 472;
        # 2.5 * 2 * 2 * 2 * 472 * 64
        ("aiter::mha_varlen_bwd", [[64, 2, 32]] * 5 + [[2, 64], [3], [3]] + [[]] * 19,
         [BF16] * 5 + ["float", "int", "int"] + ["Scalar"] * 19,
         _conc(27, p8="32", p9="32", p10="0.0", p11="0.17", p12="False", p13="False", p14="8", p15="8",
               p16="False")),
    ]  # fmt: skip
    rows = _rows(tmp_path, ops)
    assert [r[1] for r in rows] == ["attention"] * 8
    assert rows[0][2] == 2 * 2 * 8 * (128 * 128 // 2) * 256 and rows[0][4] is True
    assert rows[0][3] == 4 * (2 * 128 * 8 * 128) * 2  # q, k, v + out, bf16
    assert rows[1][2] is None and rows[1][6] == UNMODELED
    assert rows[2][2] == 2 * 1 * 4 * 952 * 128
    assert rows[3][2] == 2 * 2 * 8 * 1536 * 128
    assert rows[4][2] is None and rows[4][6] == VARLEN_ELSEWHERE
    assert rows[5][2] == 2.5 * 2 * 1 * 2 * 32 * 32 * 128
    assert rows[5][3] == 5 * (32 * 2 * 64) * 2 + (2 * 32) * 4 + 3 * (32 * 2 * 64) * 2
    assert rows[6][2] == 2.5 * 2 * 1 * 2 * (32 * 32 // 2) * 128
    assert rows[7][2] == 2.5 * 2 * 2 * 2 * 472 * 64
    assert all(r[5] == 1 for r in rows)


# ---------------------------------------------------------------------------------------------
# vLLM's flash-attention builds
# ---------------------------------------------------------------------------------------------
def test_vllm_flash_attention(tmp_path: Path) -> None:
    fa2 = "_vllm_fa2_C::varlen_fwd"
    fa2_types = [BF16] * 4 + ["int", "int"] + ["Scalar"] * 16
    fa3 = "_vllm_fa3_C::fwd"
    fa3_types = [BF16] * 3 + [""] * 3 + [BF16, "int", "int"] + ["Scalar"] * 28
    ops = [
        # varlen_fwd(q, k, v, out, cu_q, cu_k, seqused_k, leftpad_k, block_table, alibi, max_q, max_k,
        # p_dropout, scale, zero_tensors, is_causal, wl, wr, ...): a ViT encoder: 4 images of 256 patches
        # (T = 1024 = 4 * 256), H 16, D 80, not causal: 2 * 4 * 16 * 256 * 256 * 160; out is passed in,
        # so bytes = q, k, v, out (bf16) + cu_q, cu_k [5] (int32)
        (fa2, [[1024, 16, 80]] * 4 + [[5], [5]] + [[]] * 16, fa2_types,
         _conc(22, p10="256", p11="256", p12="0.0", p13="0.11", p14="False", p15="False", p16="-1",
               p17="-1")),
        # decode over the paged KV cache: block_table [8, 16] given, the KV lengths are unknown
        (fa2, [[8, 16, 80], [500, 16, 16, 80], [500, 16, 16, 80], [8, 16, 80], [9], [9], [8], [], [8, 16]]
         + [[]] * 13, [BF16] * 4 + ["int"] * 5 + ["Scalar"] * 13,
         _conc(22, p10="1", p11="4096", p12="0.0", p13="0.11", p14="False", p15="True", p16="-1", p17="-1")),
        # _vllm_fa3_C::fwd(q, k, v, k_new, v_new, q_v, out, cu_q 7, cu_k 8, cu_k_new, seqused_q, seqused_k,
        # max_q 12, max_k 13, page_table 14, ..., softmax_scale 23, is_causal 24, wl 25, wr 26, ...):
        # 2 sequences of 512 (T = 1024), H 8, D 128, causal with window (128, 0): query i sees
        # min(i, 128) + 1 keys: (1 + ... + 128) + 384 * 129 = 8256 + 49536 = 57792; 2 * 2 * 8 * 57792 * 256
        (fa3, [[1024, 8, 128]] * 3 + [[]] * 3 + [[1024, 8, 128], [3], [3]] + [[]] * 28, fa3_types,
         _conc(37, p12="512", p13="512", p23="0.088", p24="True", p25="128", p26="0", p27="0.0")),
        # the same reading K, V through a page_table (argument 14): unknown
        (fa3, [[1024, 8, 128]] * 3 + [[]] * 3 + [[1024, 8, 128], [3], [3]] + [[]] * 5 + [[2, 64]] + [[]] * 22,
         fa3_types[:14] + ["int"] + ["Scalar"] * 22,
         _conc(37, p12="512", p13="512", p23="0.088", p24="True", p25="128", p26="0", p27="0.0")),
        # fwd_kvcache: attention over the KV cache, whose per-sequence lengths are not in the shapes
        ("_vllm_fa2_C::fwd_kvcache", [[8, 1, 16, 80], [500, 16, 16, 80], [500, 16, 16, 80]] + [[]] * 17,
         [BF16] * 3 + ["Scalar"] * 17, _conc(20, p13="0.11", p14="True", p15="-1", p16="-1")),
    ]  # fmt: skip
    rows = _rows(tmp_path, ops)
    assert [r[:2] for r in rows] == [(fa2, "attention")] * 2 + [(fa3, "attention")] * 2 + [
        ("_vllm_fa2_C::fwd_kvcache", "attention")
    ]
    assert rows[0][2] == 2 * 4 * 16 * 256 * 256 * 160 and rows[0][4] is False
    assert rows[0][3] == 4 * (1024 * 16 * 80) * 2 + 2 * 5 * 4
    assert rows[1][2] is None and rows[1][6] == VARLEN_ELSEWHERE
    assert rows[2][2] == 2 * 2 * 8 * 57792 * 256 and rows[2][4] is True
    assert rows[3][2] is None and rows[3][6] == VARLEN_ELSEWHERE
    assert rows[4][2] is None and rows[4][6] == PAGED
    assert all(r[5] == 1 for r in rows)


# ---------------------------------------------------------------------------------------------
# the shared H100 traces: flash attention with the window arguments recorded empty
# ---------------------------------------------------------------------------------------------
@requires_shared
def test_real_h100_flash_attention_is_unchanged(tmp_path: Path) -> None:
    """Qwen1.5-0.5B (TraceLens's H100 trace): 24 aten::_flash_attention_forward calls, q, k, v
    [B 16, L 559, H 16, D 64], Concrete Inputs is_causal 'True', window_size_left / right '' (None):
    causal square, half of 559 * 559 per head: 2 * 16 * 16 * (559 * 559 / 2) * 128."""
    qwen = TRACES / "kineto" / "tracelens" / "h100" / "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
    con = ingested([qwen], tmp_path / "ws.duckdb")
    try:
        rows = con.execute(
            "SELECT input_dims[1], causal, flops, flops_unknown, count(*) FROM op_flops "
            "WHERE op = 'aten::_flash_attention_forward' GROUP BY ALL"
        ).fetchall()
    finally:
        con.close()
    assert rows == [([16, 559, 16, 64], True, 2 * 16 * 16 * (559 * 559 / 2) * 128, None, 24)]


# ---------------------------------------------------------------------------------------------
# fused MoE: a row with the reason, never a guess
# ---------------------------------------------------------------------------------------------
MOE_UNKNOWN = "MoE: expert weights, top_k and routing not among the recorded shapes"


@requires_shared
def test_real_b200_moe_forward_is_listed_as_unknown(tmp_path: Path) -> None:
    """vLLM GPT-OSS on B200 (TraceLens's eager trace): vllm::moe_forward(hidden_states [888, 3072],
    router_logits [888, 128], layer_name) holds more than half of the kernel time, but its shapes name
    neither top_k nor the expert weights (TraceLens's MoE pseudo-ops read them from outside the op):
    36 rows of kind gemm with their kernels and the reason, so MFU counts the time as of unknown
    FLOPs. vllm::unified_attention_with_output stays paged-unknown."""
    b200 = TRACES / "kineto" / "tracelens" / "b200" / "eager_trace.json.gz"
    con = ingested([b200], tmp_path / "ws.duckdb")
    try:
        rows = con.execute(
            "SELECT op, kind, count(*), count(flops), any_value(flops_unknown), min(kernels), "
            "list(DISTINCT input_dims[1:2]) FROM op_flops WHERE op LIKE 'vllm::%' GROUP BY ALL ORDER BY op"
        ).fetchall()
    finally:
        con.close()
    assert rows[0][:5] == ("vllm::moe_forward", "gemm", 36, 0, MOE_UNKNOWN)
    assert rows[0][5] >= 1 and rows[0][6] == [[[888, 3072], [888, 128]]]
    assert rows[1][:5] == ("vllm::unified_attention_with_output", "attention", 36, 0, PAGED)
