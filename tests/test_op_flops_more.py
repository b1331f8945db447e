"""FLOPs from shapes (queries/hfu/op_flops.sql) for transposed convolution, variable-length attention and
custom (vLLM / aiter / sglang / flash-attn) GEMM and attention ops, and the reason op_flops gives
(`flops_unknown`) where the recorded shapes cannot say.

Expected values: hand counts on small Kineto traces written here (the arithmetic in each comment),
and AMD TraceLens's stored reference outputs (`oracles/tracelens/tracelens__inference__*/perf_csvs/
GEMM.csv`, `InferenceAttention_fwd.csv`) for the custom ops of its inference traces.

The custom ops reach `kineto_op_shapes` because the ingest keeps their shapes
(sources/kineto/duck_json.COMPUTE_OPS holds op_flops.sql's custom-op pattern: a test checks it).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
from conftest import TRACES, ingested, requires_shared
from test_kineto import kernel_dict, launch_dict, write_trace

from nsight_analyze.store import query_layer

BF16 = "c10::BFloat16"
KERNEL_US = 10
VARLEN_UNKNOWN = "varlen attention: per-sequence lengths not recorded (only total tokens and max seqlen)"
PAGED_UNKNOWN = "paged KV cache: per-sequence KV lengths not recorded"
OP_FLOPS_SQL = query_layer.query_path("op_flops")


def test_the_ingest_keeps_the_shapes_of_every_op_op_flops_reads() -> None:
    """op_flops.sql's custom-op pattern is part of the ingest's filter (duck_json.COMPUTE_OPS): the
    shapes of an op op_flops counts are never dropped at ingest (the two are written apart: one is
    SQL, the other the filter both parse paths apply)."""
    from nsight_analyze.sources.kineto import duck_json

    sql = OP_FLOPS_SQL.read_text()
    for column in ("name", "op"):
        custom = re.search(rf"OR regexp_matches\({column}, '([^']*)'\)", sql).group(1)
        assert custom.removeprefix("^") in duck_json.COMPUTE_OPS, column


def _trace(path: Path, ops: list[tuple]) -> Path:
    """One leaf op per entry (name, dims, types, concrete or None), 20 µs apart on one thread, each
    launching one 10 µs kernel; a ProfilerStep around them all."""
    events = []
    for i, (name, dims, types, concrete) in enumerate(ops):
        ts, ext, corr = 1000 + 20 * i, 1 + i, 100 + i
        args = {"External id": ext, "Input Dims": dims, "Input type": types}
        if concrete is not None:
            args["Concrete Inputs"] = concrete
        events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 9, "tid": 9, "ts": ts, "dur": 12,
                       "args": args})  # fmt: skip
        events.append(launch_dict(ts + 1, corr, ext))
        events.append(kernel_dict(f"kernel_{i}", ts + 5, KERNEL_US, corr, ext))
    step = {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 9, "tid": 9, "ts": 990,
            "dur": 20 * len(ops) + 30, "args": {"External id": 999}}  # fmt: skip
    return write_trace(path, [step, *events])


def _rows(tmp_path: Path, ops: list[tuple]) -> list[tuple]:
    con = ingested([_trace(tmp_path / "rank0.pt.trace.json", ops)], tmp_path / "ws.duckdb")
    try:
        return con.execute(
            "SELECT op, kind, flops, bytes, causal, kernels, flops_unknown FROM op_flops ORDER BY start_ns"
        ).fetchall()
    finally:
        con.close()


# ---------------------------------------------------------------------------------------------
# transposed convolution
# ---------------------------------------------------------------------------------------------
def test_transposed_convolution(tmp_path: Path, fast_path) -> None:
    ops = [
        # conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation):
        # input [2, 8, 5, 5], weight [Cin 8, Cout/groups 4, 3, 3], bias [4], stride 2, padding 1,
        # output_padding 1: each input element meets Cout/groups * kh * kw weights:
        # 2 * N * Cin * H*W * Cout/groups * kh*kw = 2 * 2 * 8 * 25 * 4 * 9;
        # out H = (5 - 1)*2 - 2*1 + 1*(3 - 1) + 1 + 1 = 10; bytes (x + w + bias + out [2, 4, 10, 10]) * 4
        ("aten::conv_transpose2d", [[2, 8, 5, 5], [8, 4, 3, 3], [4], [], [], [], [], []], ["float"] * 3,
         ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1", "[1, 1]"]),
        # aten::convolution(..., transposed=True, output_padding [0], groups 2): input [1, 4, 7], weight
        # [Cin 4, Cout/groups 3, k 3]: 2 * 1 * 4 * 7 * 3 * 3; out L = (7 - 1) + (3 - 1) + 1 = 9, Cout 3*2
        ("aten::convolution", [[1, 4, 7], [4, 3, 3], [], [], [], [], [], [], []], ["float", "float", ""],
         ["", "", "", "[1]", "[0]", "[1]", "True", "[0]", "2"]),
        # the same without Concrete Inputs: transposed or not is unknown, so are the FLOPs
        ("aten::convolution", [[1, 4, 7], [4, 3, 3], [], [], [], [], [], [], []], ["float", "float", ""],
         None),
    ]  # fmt: skip
    rows = _rows(tmp_path, ops)
    assert [r[:2] for r in rows] == [("aten::conv_transpose2d", "conv")] + [("aten::convolution", "conv")] * 2
    assert rows[0][2] == 2 * 2 * 8 * 25 * 4 * 9
    assert rows[0][3] == (2 * 8 * 5 * 5 + 8 * 4 * 3 * 3 + 4 + 2 * 4 * 10 * 10) * 4
    assert rows[1][2] == 2 * 1 * 4 * 7 * 3 * 3
    assert rows[1][3] == (1 * 4 * 7 + 4 * 3 * 3 + 1 * 6 * 9) * 4
    assert rows[0][6] is None and rows[1][6] is None
    assert rows[2][2] is None and rows[2][6] == "transposed flag not recorded (Concrete Inputs)"
    assert all(r[5] == 1 for r in rows)


# ---------------------------------------------------------------------------------------------
# variable-length attention (aten)
# ---------------------------------------------------------------------------------------------
def test_varlen_attention(tmp_path: Path, fast_path) -> None:
    flash_conc = ["", "", "", "", "", "128", "256", "0.", "False", "False", "0.125"]
    eff_conc = ["", "", "", "", "", "", "128", "128", "0.", "1", "True", "0.125", "", ""]
    ops = [
        # _flash_attention_forward(q, k, v, cum_seq_q, cum_seq_k, max_q, max_k, dropout, is_causal, ...)
        # varlen: q [T_q 384, H 4, D 64], k, v [T_k 768, 4, 64], cu_seqlens [4] (3 sequences),
        # max_q 128, max_k 256. 384 = 3 * 128 and 768 = 3 * 256: three lengths <= the max that sum to
        # 3 * max are all the max, so sum_i Lq_i*Lk_i = 3 * 128 * 256 and the FLOPs are
        # 4 * 3 * 128 * 256 * H 4 * D 64 (not causal); bytes q + k + v + out (bf16) + 2 cu_seqlens (int32)
        ("aten::_flash_attention_forward", [[384, 4, 64], [768, 4, 64], [768, 4, 64], [4], [4], *[[]] * 6],
         [BF16] * 3 + ["int", "int"] + ["Scalar"] * 6, flash_conc),
        # the same with T_q 300 < 3 * 128: the per-sequence lengths are not recorded, FLOPs unknown
        ("aten::_flash_attention_forward", [[300, 4, 64], [768, 4, 64], [768, 4, 64], [4], [4], *[[]] * 6],
         [BF16] * 3 + ["int", "int"] + ["Scalar"] * 6, flash_conc),
        # _efficient_attention_forward(q, k, v, bias, cu_seqlens_q, cu_seqlens_k, max_q, max_k, dropout,
        # custom_mask_type, ...): varlen packs the batch in [1, T, H, D]. q, k, v [1, 384, 4, 64],
        # 3 sequences, max 128 each, custom_mask_type 1 (causal): 4 * 3 * 128 * 128 * 4 * 64 / 2
        # (not 4 * 1 * 384 * 384 * 4 * 64 / 2, which counts across the sequences)
        ("aten::_efficient_attention_forward",
         [[1, 384, 4, 64]] * 3 + [[], [4], [4]] + [[]] * 8,
         [BF16] * 3 + ["", "int", "int"] + ["Scalar"] * 8, eff_conc),
        # the same with seqlen_k (argument 12) given: the KV lengths come from it, unknown
        ("aten::_efficient_attention_forward",
         [[1, 384, 4, 64]] * 3 + [[], [4], [4]] + [[]] * 6 + [[3], []],
         [BF16] * 3 + ["", "int", "int"] + ["Scalar"] * 6 + ["int", ""], eff_conc),
        # dense flash attention is unchanged: q, k, v [2, 128, 4, 64] causal: 4 * 2 * 4 * 128 * 128 * 64 / 2
        ("aten::_flash_attention_forward", [[2, 128, 4, 64]] * 3 + [[]] * 8, [BF16] * 3 + ["Scalar"] * 8,
         ["", "", "", "", "", "128", "128", "0.", "True", "False", "0.125"]),
    ]  # fmt: skip
    rows = _rows(tmp_path, ops)
    assert [r[1] for r in rows] == ["attention"] * 5
    assert rows[0][2] == 4 * 3 * 128 * 256 * 4 * 64
    assert rows[0][3] == (384 * 4 * 64 * 2 + 2 * 768 * 4 * 64 * 2 + 384 * 4 * 64 * 2) + 2 * 4 * 4
    assert rows[0][4] is False and rows[0][6] is None
    assert rows[1][2] is None
    assert rows[1][6] == VARLEN_UNKNOWN
    assert rows[2][2] == 4 * 3 * 128 * 128 * 4 * 64 // 2 and rows[2][4] is True
    assert rows[3][2] is None
    assert rows[3][6] == "varlen attention: KV lengths from seqused_k / block_table, not recorded"
    assert rows[4][2] == 4 * 2 * 4 * 128 * 128 * 64 // 2


# ---------------------------------------------------------------------------------------------
# custom ops
# ---------------------------------------------------------------------------------------------
def test_custom_gemm_and_attention_ops(tmp_path: Path, fast_path) -> None:
    ops = [
        # aiter::gemm_a8w8(XQ [M, K], WQ [N, K], x_scale, w_scale, bias, dtype, splitK): 2 * 64 * 128 * 256;
        # bytes unknown (the output's dtype is an argument, not an input type)
        ("aiter::gemm_a8w8", [[64, 256], [128, 256], [64, 1], [1, 128], [], [], []],
         ["c10::Float8_e4m3fnuz"] * 2 + ["float"] * 2 + ["", "Scalar", ""], None),
        # vLLM _C::cutlass_scaled_mm(out [M, N], a [M, K], b [K, N], a_scales, b_scales, bias):
        # 2 * 64 * 128 * 256
        ("_C::cutlass_scaled_mm", [[64, 128], [64, 256], [256, 128], [1], [1], []],
         [BF16] + ["c10::Float8_e4m3fn"] * 2 + ["float"] * 2 + [""], None),
        # the same with an output that does not match a and b: the layout is not what we read, unknown
        ("_C::cutlass_scaled_mm", [[64, 256], [64, 256], [256, 128], [1], [1], []],
         [BF16] + ["c10::Float8_e4m3fn"] * 2 + ["float"] * 2 + [""], None),
        # a quantized GEMM whose packed weight hides K: a GEMM by name, layout not known
        ("_C::gptq_marlin_gemm", [[64, 256], [16, 256], [], [], []], [BF16, "int", "", "", ""], None),
        # flash_attn::_flash_attn_varlen_forward(q, k, v, cu_q, cu_k, max_q, max_k, dropout, scale,
        # causal, ...): q, k, v [2 * 64, 8, 128], 2 sequences of max 64, causal: 4 * 2 * 64 * 64 * 8 * 128 / 2
        ("flash_attn::_flash_attn_varlen_forward", [[128, 8, 128]] * 3 + [[3], [3]] + [[]] * 5,
         [BF16] * 3 + ["int", "int"] + ["Scalar"] * 5,
         ["", "", "", "", "", "64", "64", "0.", "0.088", "True"]),
        # vLLM's attention over its KV cache: the context lengths are not among the op's shapes
        ("vllm::unified_attention_with_output",
         [[32, 64, 64], [32, 8, 64], [32, 8, 64], [32, 64, 64], [], []],
         [BF16] * 4 + ["", ""], None),
        # an attention op of a known namespace but unknown arguments
        ("aiter::paged_attention_rocm", [[32, 64, 64], [100, 8, 16, 64]], [BF16, BF16], None),
    ]  # fmt: skip
    rows = _rows(tmp_path, ops)
    assert [r[:2] for r in rows] == [
        ("aiter::gemm_a8w8", "gemm"), ("_C::cutlass_scaled_mm", "gemm"), ("_C::cutlass_scaled_mm", "gemm"),
        ("_C::gptq_marlin_gemm", "gemm"), ("flash_attn::_flash_attn_varlen_forward", "attention"),
        ("vllm::unified_attention_with_output", "attention"), ("aiter::paged_attention_rocm", "attention"),
    ]  # fmt: skip
    assert rows[0][2] == 2 * 64 * 128 * 256 and rows[0][3] is None
    assert rows[1][2] == 2 * 64 * 128 * 256
    assert rows[2][2] is None
    assert rows[3][2] is None and rows[3][6] == "custom op: argument layout not known"
    assert rows[4][2] == 4 * 2 * 64 * 64 * 8 * 128 // 2 and rows[4][4] is True
    assert rows[5][2] is None and rows[5][6] == "paged KV cache: per-sequence KV lengths not recorded"
    assert rows[6][2] is None and rows[6][6] == "custom op: argument layout not known"
    assert all(r[5] == 1 for r in rows)  # every one's kernel: MFU counts the NULL ones as unknown


# ---------------------------------------------------------------------------------------------
# TraceLens's numbers for the custom GEMM and attention ops of its inference traces
# ---------------------------------------------------------------------------------------------
INFERENCE = TRACES / "kineto" / "tracelens" / "inference"
TL = TRACES / "oracles" / "tracelens"
SGLANG = INFERENCE / "sglang_prefilldecode" / "sglang_Qwen3-8B_prefilldecode.json.gz"
VLLM_CAPTURE = (
    INFERENCE / "vllm_decode_full" / "capture_traces"
    / "graph_capture_rank_0.1773709742341309550.pt.trace.json.gz"
)  # fmt: skip


def _oracle_rows(case: str, name: str, csv_name: str = "GEMM.csv") -> list[dict]:
    with (TL / f"tracelens__inference__{case}" / "perf_csvs" / csv_name).open(newline="") as fh:
        return [r for r in csv.DictReader(fh) if r["name"] == name]


@requires_shared
@pytest.mark.parametrize(
    ("case", "name"),
    [("sglang_prefilldecode", "aiter::gemm_a16w16"), ("vllm_decode_full", "vllm::rocm_unquantized_gemm")],
)
def test_custom_gemm_equals_tracelens(tmp_path: Path, case: str, name: str) -> None:
    """In the real traces these ops wrap aten::linear -> aten::mm / addmm, which count instead (next
    test); as a leaf (their kernel launched directly) they get TraceLens's GEMM.csv numbers from the
    same `Input Dims` / `Input type` / `Concrete Inputs` (GFLOPS_first, Data Moved (MB)_first, MiB)."""
    import ast

    expected = _oracle_rows(case, name)
    assert expected
    ops = [
        (name, ast.literal_eval(r["Input Dims_first"]), ast.literal_eval(r["Input type_first"]),
         ast.literal_eval(r["Concrete Inputs_first"]))
        for r in expected
    ]  # fmt: skip
    rows = _rows(tmp_path, ops)
    assert len(rows) == len(expected)
    for row, r in zip(rows, expected, strict=True):
        dims = r["Input Dims_first"]
        assert row[2] / 1e9 == pytest.approx(float(r["GFLOPS_first"]), rel=1e-12), dims
        assert row[3] / 2**20 == pytest.approx(float(r["Data Moved (MB)_first"]), rel=1e-12), dims


@requires_shared
def test_real_sglang_trace_custom_ops(tmp_path: Path) -> None:
    """sglang Qwen3-8B prefill (MI300X): aiter::gemm_a16w16 wraps aten::linear -> aten::mm, so only
    the mm counts (no FLOPs twice); aiter::mha_batch_prefill is a leaf whose FLOPs are unknown:
    q [15360, 32, 128] with cu_seqlens_q [16] and max_seqlen_q 1024 gives 15 sequences of 1024
    (15360 = 15 * 1024), but K and V are the KV pool [835874, 8, 128] and the per-sequence KV lengths
    live in kv_indptr's values, which the trace does not record. TraceLens's InferenceAttention_fwd.csv
    gives 128.85 GFLOPs by taking every KV length as max_seqlen_k (1024): an assumption, not a count."""
    con = ingested([SGLANG], tmp_path / "ws.duckdb")
    try:
        rows = con.execute(
            "SELECT op, count(*), count(flops), any_value(flops_unknown), bool_and(causal), min(kernels) "
            "FROM op_flops GROUP BY op ORDER BY op"
        ).fetchall()
    finally:
        con.close()
    assert rows == [
        ("aiter::mha_batch_prefill", 36, 0, "paged KV cache: per-sequence KV lengths not recorded", True, 1),
        ("aten::mm", 145, 145, None, None, 1),
    ]
    oracle = _oracle_rows("sglang_prefilldecode", "aiter::mha_batch_prefill", "InferenceAttention_fwd.csv")
    # 36 calls; sum_i Lq_i * Lk_i taken as 15 * 1024 * 1024
    assert int(oracle[0]["name_count"]) == 36 and oracle[0]["param: c_sqsk"] == "15728640.0"


@requires_shared
def test_real_vllm_capture_attention_is_unknown(tmp_path: Path) -> None:
    """vLLM GPT-OSS decode capture: vllm::unified_attention_with_output's q [32, 64, 64] and the new
    token's k, v [32, 8, 64] are its only shapes; the context lengths (TraceLens's N_KV 55086, from
    outside these shapes) are not recorded, so the FLOPs are unknown. vllm::rocm_unquantized_gemm wraps
    aten::linear -> aten::addmm / aten::mm, which count."""
    con = ingested([VLLM_CAPTURE], tmp_path / "ws.duckdb")
    try:
        rows = con.execute(
            "SELECT op, count(*), count(flops), any_value(flops_unknown) FROM op_flops "
            "GROUP BY op ORDER BY op"
        ).fetchall()
    finally:
        con.close()
    assert ("vllm::unified_attention_with_output", 24, 0, PAGED_UNKNOWN) in rows
    assert ("aten::addmm", 72, 72, None) in rows
    assert not any(r[0] == "vllm::rocm_unquantized_gemm" for r in rows)
