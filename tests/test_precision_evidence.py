"""GEMM precision from evidence, the unaligned-GEMM finding, and fixes checked against the GPU.

Issue 52 points 1 and 7: a bf16 GEMM named `..._bf16_s1688gemm_bf16_...` was called TF32 because the
MMA-shape token s1688 was tested before the dtype token; an unaligned GEMM (`_align2`) was named by
no finding; and on a V100 the precision fix was bf16 autocast and "allow TF32", which Volta has not.
Expected values come from the trace files themselves (kernel names, durations and the ops' `Input
Dims` read here with json, independently of the ingest), from hand labels of real kernel names (each
names the shared trace it was taken from, and a test checks it is there), and from the capability
rules NVIDIA/AMD document (bf16/TF32 need CC >= 8.0, FP8 CC >= 8.9; MI200 bf16 but no XF32).
"""

from __future__ import annotations

import gzip
import json
import re
from functools import cache
from pathlib import Path

import duckdb
import pytest
from conftest import TRACES, ingested, requires_shared

from nsight_analyze.diagnose import diagnose
from nsight_analyze.gpus import arch as gpu_arch
from nsight_analyze.rules import advice
from nsight_analyze.store import query_layer

KINETO = TRACES / "kineto"
BERT = KINETO / "tracelens" / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
QWEN = KINETO / "tracelens" / "h100" / "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
V100 = KINETO / "hta" / "trace_diff" / "test" / "test.json.gz"

# (kernel name, the shared trace it comes from (None: not in the shared traces, named by the issue or
# by the library's naming scheme), the input precision labelled by hand from the name's type tokens)
NAMES = [
    # the example: bf16 inputs, s1688 = fp32 accumulate on a 16x8x8 MMA (not TF32)
    ("cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_nn_align1", None, "bf16"),
    (
        "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_tn_align2>"
        "(cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_tn_align2::Params)",
        BERT,
        "bf16",
    ),
    (
        "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>"
        "(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8::Params)",
        BERT,
        "bf16",
    ),
    (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off"
        "_kernel__5x_cublas",
        QWEN,
        "bf16",
    ),
    (
        "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>"
        "(cutlass_80_simt_sgemm_128x32_8x5_nn_align1::Params)",
        QWEN,
        "fp32",
    ),
    # fp32 operands on tensor cores without a type token: cuBLAS's TF32 path (A100)
    (
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_nt_align1>"
        "(cutlass_80_tensorop_s1688gemm_256x128_32x3_nt_align1::Params)",
        KINETO / "hta" / "negative_queue_length_values_check" / "rank0.json.gz",
        "tf32",
    ),
    ("volta_sgemm_128x32_nn", V100, "fp32"),
    (
        "ampere_sgemm_32x32_sliced1x4_tn",
        KINETO / "hta" / "critical_path" / "benchmark_result_2869224_1695835535_trace.json.gz",
        "fp32",
    ),
    (
        "ampere_gcgemm_64x64_nt",
        KINETO / "hta" / "critical_path" / "benchmark_result_2869224_1695835535_trace.json.gz",
        "fp32",
    ),
    (
        "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_"
        "warpsize2x2x1_g1_tensor16x8x8_alignc4_execute_kernel_cudnn",
        KINETO / "hta" / "critical_path" / "benchmark_result_2869224_1695835535_trace.json.gz",
        "tf32",
    ),
    # cuBLASLt nvjet names state no type: unknown, never guessed
    ("nvjet_tst_144x128_64x6_2x1_v_bz_bias_TNN", KINETO / "tracelens" / "b200" / "eager_trace.json.gz", None),
    # TRT-LLM MoE GEMM: bf16 OUTPUT, MXFP4 x MXFP8 inputs: the input type wins
    (
        "bmm_Bfloat16_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_transOut_"
        "schedP2x1x2x3_biasM_bN_tmaOpt",
        KINETO / "tracelens" / "b200" / "eager_trace.json.gz",
        "fp8",
    ),
    # AMD hipBLASLt / Tensile: BBS = bf16 in, bf16 out, fp32 compute (MI300X)
    (
        "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT128x256x32_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1",
        KINETO / "tracelens" / "inference" / "sglang_prefilldecode" / "sglang_Qwen3-8B_prefilldecode.json.gz",
        "bf16",
    ),
    ("Cijk_Ailk_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN", None, "fp16"),
    ("Cijk_Ailk_Bljk_SB_MT64x64x8_SN", None, "fp32"),
    # cuBLAS names of other generations (naming scheme): explicit types before MMA shapes
    ("turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_nn", None, "fp16"),
    ("volta_h884gemm_64x64_ldg8_nn", None, "fp16"),
    ("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn", None, "bf16"),
    ("sm90_xmma_gemm_e4m3e4m3_bf16f32_f32_tn_n_tilesize128x128x128", None, "fp8"),
    ("sm80_xmma_gemm_i8i8_i32f32_f32_tn_n_tilesize128x128x64", None, "int8"),
]


@cache
def _macros() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for q in query_layer.layer():
        if q.name in ("gemm_precision", "gemm_alignment"):
            con.execute(q.sql)
    return con


@cache
def _events(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as fh:
        return json.load(fh)["traceEvents"]


def _kernel_names(path: Path) -> set[str]:
    return {e["name"] for e in _events(path) if e.get("cat") == "kernel"}


@pytest.mark.parametrize("name, source, expected", NAMES, ids=[n[:40] for n, _s, _e in NAMES])
def test_precision_of_real_kernel_names(name, source, expected):
    # hand label (NAMES) from the name's input-type token
    assert _macros().execute("SELECT gemm_precision(?)", [name]).fetchone()[0] == expected
    # the Python reading (advice.precision_of) is the same macro, in its coarse classes
    cls = {"bf16": "low", "fp16": "low", "fp8": "low", "int8": "low", None: "unknown"}.get(expected, expected)
    assert advice.precision_of(name) == cls


@requires_shared
@pytest.mark.parametrize("name, source", [(n, s) for n, s, _e in NAMES if s is not None])
def test_labelled_names_come_from_the_named_trace(name, source):
    names = _kernel_names(source)
    # a prefix for the long Tensile names, cut in NAMES
    assert name in names or any(n.startswith(name) for n in names), f"{name} not in {source}"


@pytest.mark.parametrize(
    "name, expected",
    [
        ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_tn_align2>(x)", 2),
        ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4", 4),
        ("volta_sgemm_128x32_nn", None),
        ("nvjet_tst_144x128_64x6_2x1_v_bz_bias_TNN", None),
    ],
)
def test_alignment_from_names(name, expected):
    # the `_alignN` token of the name, read by hand
    assert _macros().execute("SELECT gemm_alignment(?)", [name]).fetchone()[0] == expected


@pytest.mark.parametrize(
    "arch, cc, expected",
    [
        # NVIDIA: bf16 and TF32 need CC 8.0 (Ampere), FP8 CC 8.9 (Ada/Hopper); Volta has fp16 only
        ("volta", None, {"fp16": True, "bf16": False, "tf32": False, "fp8": False}),
        ("turing", None, {"fp16": True, "bf16": False, "tf32": False, "fp8": False}),
        ("ampere GA100", None, {"bf16": True, "tf32": True, "fp8": False}),
        ("ada", None, {"bf16": True, "fp8": True}),
        ("hopper", None, {"bf16": True, "tf32": True, "fp8": True}),
        ("blackwell consumer", None, {"bf16": True, "fp8": True}),
        # AMD: MI200 (CDNA2) bf16 without XF32 or FP8; MI300 (CDNA3) XF32 and FP8
        ("cdna2", None, {"bf16": True, "tf32": False, "fp8": False}),
        ("cdna3", None, {"bf16": True, "tf32": True, "fp8": True}),
        (None, (7, 0), {"fp16": True, "bf16": False, "tf32": False}),
        (None, (8, 6), {"bf16": True, "fp8": False}),
        (None, (8, 9), {"fp8": True}),
        (None, None, {"bf16": None, "tf32": None, "fp8": None}),
    ],
)
def test_capabilities(arch, cc, expected):
    for precision, want in expected.items():
        assert gpu_arch.supports(precision, arch, cc) is want, (arch, cc, precision)


# ------------------------------------------------------------------------------------------------
# Fix texts by GPU capability (no workspace)

V100_SUPPORT = {"tf32": False, "bf16": False, "fp16": True, "fp8": False, "gpu": "Tesla V100-SXM2 (volta)"}
A100_SUPPORT = {"tf32": True, "bf16": True, "fp16": True, "fp8": False, "gpu": "A100 (ampere)"}
H100_SUPPORT = {"tf32": True, "bf16": True, "fp16": True, "fp8": True, "gpu": "H100 (hopper)"}
UNKNOWN = {"tf32": None, "bf16": None, "fp16": None, "fp8": None, "gpu": "GPU unknown"}
ADVISES = re.compile(r"torch\.bfloat16|in bf16|allow_tf32|set_float32_matmul_precision|FP8 matmuls")


def _text(fixes) -> str:
    return " | ".join(f.action for f in fixes)


def test_fixes_follow_the_gpu():
    fp32 = "volta_sgemm_128x32_nn"
    # V100: fp16 with loss scaling, never bf16 / TF32 / FP8
    text = _text(advice.kernel_fixes("gemm", fp32, "fp32", V100_SUPPORT))
    assert "float16" in text and "GradScaler" in text and not ADVISES.search(text), text
    # A100: bf16 and TF32
    text = _text(advice.kernel_fixes("gemm", fp32, "fp32", A100_SUPPORT))
    assert "torch.bfloat16" in text and "allow_tf32" in text and "depends on the GPU" not in text
    # already TF32: allowing TF32 changes nothing
    assert "allow_tf32" not in _text(advice.kernel_fixes("gemm", "x_s1688gemm", "tf32", A100_SUPPORT))
    # bf16 GEMMs: FP8 only on a GPU with FP8 (H100), not on an A100; said to depend when unknown
    bf16 = "sm90_xmma_gemm_bf16bf16_bf16f32_f32"
    assert "FP8 matmuls" in _text(advice.kernel_fixes("gemm", bf16, "bf16", H100_SUPPORT))
    assert "FP8 matmuls" not in _text(advice.kernel_fixes("gemm", bf16, "bf16", A100_SUPPORT))
    unknown = _text(advice.kernel_fixes("gemm", bf16, "bf16", UNKNOWN))
    assert "FP8 matmuls" in unknown and "depends on the GPU" in unknown and "8.9" in unknown
    # unknown GPU, FP32 GEMMs: bf16 and TF32 offered with what they need
    text = _text(advice.kernel_fixes("gemm", fp32, "fp32", None))
    assert "bfloat16" in text and "allow_tf32" in text and text.count("depends on the GPU") == 2
    # activations: fp16 on a V100
    mem = _text(advice.memory_fixes(["elementwise"], False, V100_SUPPORT))
    assert "fp16" in mem and "bf16 (autocast)" not in mem


# ------------------------------------------------------------------------------------------------
# The shared traces


@pytest.fixture(scope="module")
def diagnosed(tmp_path_factory):
    """trace -> (findings, job) for the traces below, ingested and diagnosed once."""
    out = {}

    def get(path: Path):
        if path not in out:
            con = ingested([path], tmp_path_factory.mktemp("prec") / "ws.duckdb")
            try:
                d = diagnose(con)
            finally:
                con.close()
            out[path] = d
        return out[path]

    return get


def _gemm_kernels(path: Path) -> list[dict]:
    """Kernel events whose name holds 'gemm' (not FBGEMM's sparse/embedding kernels, fbgemm_gpu::),
    straight from the trace JSON (the oracle)."""
    return [
        e
        for e in _events(path)
        if e.get("cat") == "kernel" and "gemm" in e["name"].lower() and "fbgemm" not in e["name"]
    ]


@requires_shared
@pytest.mark.parametrize("trace", [BERT, QWEN], ids=["bert-h100", "qwen-h100"])
def test_h100_bf16_models_are_not_called_tf32(trace, diagnosed):
    d = diagnosed(trace)
    assert d.job["rule_errors"] == []
    # every GEMM kernel of these bf16 models on H100 is bf16 (its name), except one 3.5 us fp32 bmm
    # in Qwen (cutlass_80_simt_sgemm, a [1,32,1] x [1,1,559] float matmul of the rotary embedding)
    gemm = _gemm_kernels(trace)
    fp32 = sum(e["dur"] for e in gemm if "sgemm" in e["name"])
    assert fp32 < 0.01 * sum(e["dur"] for e in gemm)
    for f in d.findings:
        assert "TF32" not in f.title and "TF32" not in f.summary, f.id
    assert "gemm-precision" not in [f.id for f in d.findings]


@requires_shared
def test_bert_names_its_unaligned_gemm(diagnosed):
    d = diagnosed(BERT)
    f = next(f for f in d.findings if f.id == "unaligned-gemm")
    # oracle: the trace's GEMM kernels (JSON), those built for align1/align2 operands
    gemm = _gemm_kernels(BERT)
    bad = [e for e in gemm if re.search(r"_align[12]\b", e["name"])]
    assert len(bad) == 1 and "align2" in bad[0]["name"]
    share = 100.0 * sum(e["dur"] for e in bad) / sum(e["dur"] for e in gemm)
    assert f.metrics["unaligned_share_of_gemm_pct"] == pytest.approx(share, abs=0.06)
    assert f.recoverable_ns_per_step is None and f.severity == "info"  # what padding saves is unknown
    ev = {e.name: e for e in f.evidence}
    assert ev["unaligned GEMM kernels"].rows[0]["align_bytes"] == 4  # 2 bf16 elements
    assert any("multiples of 8" in x.action for x in f.fixes)
    shapes = ev.get("shapes of the unaligned GEMMs")
    if shapes is not None:  # the workspace holds the matmul ops' shapes (op_flops)
        # oracle: the cpu_op with the align2 kernel's External id: aten::addmm with Input Dims
        # [[30522], [141, 512], [512, 30522]]: M=141, K=512, N=30522 (the vocabulary)
        ext = bad[0]["args"]["External id"]
        op = next(
            e for e in _events(BERT) if e.get("cat") == "cpu_op" and e["args"].get("External id") == ext
        )
        dims = op["args"]["Input Dims"]
        row = shapes.rows[0]
        assert (row["op"], row["m"], row["k"], row["n"]) == (op["name"], dims[1][0], dims[1][1], dims[2][1])


@requires_shared
def test_v100_gets_no_bf16_or_tf32_fix(diagnosed):
    d = diagnosed(V100)
    assert d.job["rule_errors"] == []
    # oracle: every GEMM kernel of the trace is a volta_sgemm / magma sgemm / gemv<float> (FP32 CUDA
    # cores) on a Tesla V100 (deviceProperties): the precision finding is right to fire
    assert all(re.search(r"sgemm|float", e["name"]) for e in _gemm_kernels(V100))
    f = next(f for f in d.findings if f.id == "gemm-precision")
    assert f.metrics["tf32_gemm_ns_total"] == 0
    text = _text(f.fixes)
    assert "torch.float16" in text and "GradScaler" in text
    for finding in d.findings:  # no finding advises what Volta cannot run
        assert not ADVISES.search(_text(finding.fixes)), finding.id


# ------------------------------------------------------------------------------------------------
# Op dtypes where the kernel name states none (synthetic PyTorch-profiler trace, hand counts)

NVJET = "nvjet_tst_128x128_64x4_1x2_h_bz_TNN"  # cuBLASLt on Hopper: no type in the name


def _nvjet_trace(path: Path) -> Path:
    """Two aten::mm ops on an H100, one with float inputs and one with bf16 inputs, each launching
    one nvjet GEMM (800 us and 200 us), recorded with record_shapes (Kineto's layout: the op's
    External id on its launch and kernel, the launch inside the op's span)."""
    from test_kineto import write_trace

    def op(ts, ext, dtype):
        return {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 9, "tid": 9, "ts": ts, "dur": 30,
                "args": {"External id": ext, "Input Dims": [[1024, 1024], [1024, 1024]],
                         "Input type": [dtype, dtype]}}  # fmt: skip

    def launch(ts, corr, ext):
        return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9, "ts": ts,
                "dur": 5, "args": {"correlation": corr, "External id": ext}}  # fmt: skip

    def kernel(ts, dur, corr, ext):
        return {"ph": "X", "cat": "kernel", "name": NVJET, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
                "args": {"device": 0, "stream": 7, "correlation": corr, "External id": ext,
                         "grid": [264, 1, 1], "block": [384, 1, 1]}}  # fmt: skip

    events = [
        op(100, 1, "float"),
        launch(110, 11, 1),
        op(140, 2, "c10::BFloat16"),
        launch(150, 12, 2),
        kernel(200, 800, 11, 1),
        kernel(1000, 200, 12, 2),
    ]
    props = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85_045_870_592, "computeMajor": 9,
              "computeMinor": 0, "numSms": 132}]  # fmt: skip
    return write_trace(path, events, deviceProperties=props)


def test_op_dtype_decides_where_the_name_states_no_type(tmp_path):
    con = ingested([_nvjet_trace(tmp_path / "rank0.pt.trace.json")], tmp_path / "ws.duckdb")
    try:
        assert con.execute(f"SELECT gemm_precision('{NVJET}')").fetchone()[0] is None
        d = diagnose(con)
    finally:
        con.close()
    assert d.job["rule_errors"] == []
    f = next(f for f in d.findings if f.id == "gemm-precision")
    # hand count: the float op's kernel (800 us) is FP32 or TF32; the bf16 op's (200 us) is not
    assert f.metrics["float_op_gemm_ns_total"] == 800_000
    assert f.metrics["fp32_gemm_ns_total"] == 0 and f.metrics["tf32_gemm_ns_total"] == 0
    assert f.metrics["fp32_tf32_share_of_gemm_pct"] == 80.0  # 800 of the 1000 us of GEMM time
    # H100 SXM dense peaks (NVIDIA H100 whitepaper): FP32 66.9, TF32 494.7, BF16 989.4 TFLOP/s; one
    # window (no steps): the bound takes the FP32 factor, the low end the TF32 one
    assert f.recoverable_ns_per_step == round(800_000 * (1 - 66.9 / 989.4))
    assert f.metrics["recoverable_ns_per_step_low"] == round(800_000 * (1 - 494.7 / 989.4))
    text = _text(f.fixes)
    assert "torch.bfloat16" in text and "allow_tf32" in text and "depends on the GPU" not in text


B200 = KINETO / "tracelens" / "b200" / "eager_trace.json.gz"


@requires_shared
def test_b200_nvjet_gemms_take_their_ops_dtype(tmp_path):
    from nsight_analyze.rules._gemm_ops import op_gemms

    # oracle: each nvjet kernel's External id names the cpu_op that launched it; its `Input type`
    ev = _events(B200)
    kernels = [e for e in ev if e.get("cat") == "kernel" and e["name"].startswith("nvjet")]
    mm = ("aten::mm", "aten::addmm")
    ops = {
        e["args"]["External id"]: e
        for e in ev
        if e.get("cat") == "cpu_op" and e["name"] in mm and "External id" in e["args"]
    }
    launched = [ops[k["args"]["External id"]] for k in kernels]
    # the A operand: addmm lists the bias first
    want = sorted((o["name"], o["args"]["Input type"][o["name"] == "aten::addmm"]) for o in launched)
    assert len(want) == 109 and {t for _o, t in want} == {"c10::BFloat16"}
    con = ingested([B200], tmp_path / "ws.duckdb")
    nvjet = op_gemms("k.name LIKE 'nvjet%'")
    try:
        got = sorted(con.execute(f"SELECT op, dtype FROM ({nvjet})").fetchall())
        d = diagnose(con)
    finally:
        con.close()
    assert got == want
    # bf16 GEMMs on a B200: nothing to move to 16 bits
    assert "gemm-precision" not in [f.id for f in d.findings]
