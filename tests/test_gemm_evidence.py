"""FLOPs from shapes as evidence of the small-grid, dominant-kernel and attention findings (issue 52,
"FLOPs from shapes": the GEMM findings use these numbers as evidence).

Where a trace recorded shapes, low-occupancy, dominant-kernel and unfused-attention add the ops
that launched their kernels (rules/op_roofline.py) with achieved TFLOP/s against the dense peak of
their dtype, arithmetic intensity against the ridge point and the shapes, and signals from them.

Oracles: the trace files themselves, read here with gzip/json independently of the ingest (a kernel
belongs to the op whose span on the launching thread holds its runtime/driver call, matched by
`correlation`, or, for attention, to the op whose `External id` it carries; FLOPs from `Input Dims`
by the textbook formulas; grids against `deviceProperties.numSms`); AMD TraceLens's stored GEMM.csv
for the SGLang trace (GFLOPS, kernel time, FLOPS/Byte per shape); the vendors' data sheets for the
peaks (H100 SXM: 989.4 TFLOPS dense BF16, 3.35 TB/s; B200: 2.25 PFLOPS dense BF16, 8 TB/s; V100
SXM2: 15.7 TFLOPS FP32, 900 GB/s; A100 SXM4 80GB: 156 TFLOPS TF32, 2039 GB/s; MI300X: 1307.4
TFLOPS dense BF16, 5.3 TB/s); and a hand-built trace whose shapes, FLOPs and kernel times are known
by construction.
"""

from __future__ import annotations

import bisect
import csv
import gzip
import json
import math
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import TRACES, ingested, shared_ingested
from test_kineto import kernel_dict, launch_dict, op_dict, write_trace

from nsight_analyze.diagnose import diagnose, resolve_thresholds
from nsight_analyze.rules import dominant_kernel, op_roofline
from nsight_analyze.rules.base import Ctx

KINETO = TRACES / "kineto"
BERT = KINETO / "tracelens" / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
QWEN = KINETO / "tracelens" / "h100" / "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
B200 = KINETO / "tracelens" / "b200" / "eager_trace.json.gz"
V100 = KINETO / "hta" / "trace_diff" / "test" / "test.json.gz"
A100 = KINETO / "hta" / "negative_queue_length_values_check" / "rank0.json.gz"
SGLANG = KINETO / "tracelens" / "inference" / "sglang_prefilldecode" / "sglang_Qwen3-8B_prefilldecode.json.gz"
SGLANG_GEMM = (
    TRACES / "oracles" / "tracelens" / "tracelens__inference__sglang_prefilldecode" / "perf_csvs" / "GEMM.csv"
)

# data sheets: (dense peak TFLOP/s of the precision the trace's GEMMs run in, memory GB/s)
H100_BF16 = (989.4, 3350.0)
B200_BF16 = (2250.0, 8000.0)
V100_FP32 = (15.7, 900.0)
MI300X_BF16 = (1307.4, 5300.0)
A100_80GB_TF32 = (156.0, 2039.0)  # float GEMMs whose kernels are TF32 (cutlass_80_tensorop_s1688gemm)
# H100 SXM FP32 (CUDA cores): 132 SMs x 128 FP32 lanes x 2 FLOP x 1.98 GHz = 66.9 (data sheet: 67)
H100 = {"bf16": H100_BF16, "fp32": (66.9, 3350.0)}


def _skip_absent(*paths: Path) -> None:
    for p in paths:
        if not p.exists():
            pytest.skip(f"{p} (shared real traces) is absent")


def _finding(findings, fid):
    ids = [f.id for f in findings]
    assert fid in ids, f"{fid} not found: {ids}"
    return next(f for f in findings if f.id == fid)


def _evidence(finding, name):
    return next(e for e in finding.evidence if e.name == name)


def _signal(finding, name):
    return next(s for s in finding.signals if s.name == name)


def _raw_gemm_ops(path: Path) -> dict[tuple, dict]:
    """Per (op, batch, M, N, K) of the aten::mm/addmm/bmm ops, from the trace JSON: ops, FLOPs per
    op (2*M*N*K, + M*N for addmm's bias; x batch for bmm), their kernels' summed duration in ns,
    and how many ops launched a kernel with fewer blocks (grid x*y*z) than the device's SMs. A
    kernel belongs to the op whose span on the launching thread holds its runtime call (kernel
    and call share `correlation`; old traces give kernels no op's External id)."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    sms = {p.get("id"): p.get("numSms") for p in doc.get("deviceProperties", [])}
    events = doc["traceEvents"]
    names = ("aten::mm", "aten::addmm", "aten::bmm")
    ops = defaultdict(list)  # tid -> ops, by start (these three never nest in one another)
    for e in events:
        if e.get("cat") == "cpu_op" and e.get("name") in names and e.get("args", {}).get("Input Dims"):
            ops[e["tid"]].append(e)
    starts = {tid: sorted(o["ts"] for o in v) for tid, v in ops.items()}
    by_start = {tid: {o["ts"]: o for o in v} for tid, v in ops.items()}
    calls = {  # launch calls: the runtime's, or the driver's (cuLaunchKernel: cuBLASLt, CUTLASS)
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    kernels = defaultdict(list)  # id(op) -> its kernels
    owner = {}
    for e in events:
        call = calls.get(e.get("args", {}).get("correlation")) if e.get("cat") == "kernel" else None
        if call is None or call["tid"] not in starts:
            continue
        i = bisect.bisect_right(starts[call["tid"]], call["ts"]) - 1
        o = by_start[call["tid"]][starts[call["tid"]][i]] if i >= 0 else None
        if o is not None and call["ts"] <= o["ts"] + o["dur"]:
            kernels[id(o)].append(e)
            owner[id(o)] = o
    out: dict[tuple, dict] = {}
    for key, ks in kernels.items():
        o = owner[key]
        name, dims = o["name"], o["args"]["Input Dims"]
        if name == "aten::bmm":
            (b, m, k), (_, _, n) = dims[0], dims[1]
        else:
            (m, k), (_, n) = dims[:2] if name == "aten::mm" else (dims[1], dims[2])
            b = 1
        flops = 2 * b * m * n * k + (m * n if name == "aten::addmm" else 0)
        g = out.setdefault((name, b, m, n, k), {"ops": 0, "ns": 0.0, "flops": flops, "small_ops": 0})
        g["ops"] += 1
        g["ns"] += sum(x["dur"] for x in ks) * 1e3
        g["small_ops"] += any(
            math.prod(x["args"]["grid"]) < sms[x["args"]["device"]] for x in ks if x["args"].get("grid")
        )
    return out


@pytest.mark.parametrize(
    ("trace", "peaks"),
    [
        (BERT, H100),
        (QWEN, H100),
        (B200, {"bf16": B200_BF16}),
        (V100, {"fp32": V100_FP32}),
        (A100, {"tf32": A100_80GB_TF32}),
    ],
    ids=["bert-h100", "qwen-h100", "b200", "trace-diff-v100", "a100"],
)
def test_small_grid_ops_match_the_raw_trace(tmp_path: Path, trace: Path, peaks: dict) -> None:
    """Every GEMM row of low-occupancy's shape evidence is a shape whose ops launched small-grid
    kernels in the raw trace, with the raw trace's achieved TFLOP/s, and the data-sheet peak and
    ridge point of its GPU and dtype."""
    _skip_absent(trace)
    con = shared_ingested([trace], tmp_path / "ws.duckdb")
    try:
        f = _finding(diagnose(con), "low-occupancy")
    finally:
        con.close()
    raw = _raw_gemm_ops(trace)
    gemm = [r for r in _evidence(f, "shapes of the small-grid ops").rows if r["kind"] == "gemm"]
    # an op whose shapes give no FLOPs (vllm::moe_forward records only the hidden states and the
    # router logits: op_flops.flops_unknown) is listed with its kernels, never with a made-up shape
    shapeless = [r for r in gemm if r["m"] is None]
    assert all(r["flops_per_op"] is None and r["tiles_128"] is None for r in shapeless)
    rows = [r for r in gemm if r["m"] is not None]
    assert rows
    for r in rows:
        g = raw[(r["op"], r["batch"], r["m"], r["n"], r["k"])]
        assert 1 <= r["ops"] <= g["small_ops"]  # in the diagnosed windows: at most the whole trace's
        assert r["flops_per_op"] == g["flops"]
        if r["ops"] == g["ops"]:  # every op of the shape: the same kernel time
            assert r["tflops_per_s"] == pytest.approx(g["flops"] * g["ops"] / g["ns"] / 1e3, abs=0.006)
        peak = peaks[r["peak_precision"]]  # bf16 inputs; float ones by the kernel name (sgemm: FP32)
        assert r["peak_tflops"] == peak[0]
        assert r["ridge_flop_per_byte"] == pytest.approx(peak[0] * 1e3 / peak[1], abs=0.051)  # to 0.1
        roof = min(peak[0], r["intensity"] * peak[1] / 1e3)
        assert r["pct_of_roofline"] == pytest.approx(100 * r["tflops_per_s"] / roof, abs=0.2)


def test_small_gemm_work_and_large_tiles_are_told_apart(tmp_path: Path) -> None:
    """BERT-small's small-grid GEMMs are genuinely small work; Qwen's are not (persistent sm90
    kernels with 120 blocks on 132 SMs for outputs of 560 tiles): the signal and the fixes say so."""
    _skip_absent(BERT, QWEN)
    # hand count from the shapes in the raw trace (_raw_gemm_ops): BERT's are M=141 with (N, K) in
    # (512, 512), (512, 2048), (2048, 512): 2 x 4 x 2, 2 x 4 x 8 and 2 x 16 x 2 tiles x K slices,
    # all < 132 SMs; Qwen's are M=8944, N=1024: 70 x 8 = 560 output tiles >= 132
    assert {k[2:] for k in _raw_gemm_ops(BERT)} >= {(141, 512, 512), (141, 512, 2048), (141, 2048, 512)}
    con = shared_ingested([BERT], tmp_path / "bert.duckdb")
    try:
        bert = _finding(diagnose(con), "low-occupancy")
    finally:
        con.close()
    s = _signal(bert, "small-grid GEMM time with small work")
    assert (s.value, s.verdict) == (100.0, "supports")
    assert bert.metrics["small_work_gemm_pct"] == 100.0
    assert not any("Autotune" in x.action or "Split K" in x.action for x in bert.fixes)
    con = shared_ingested([QWEN], tmp_path / "qwen.duckdb")
    try:
        qwen = _finding(diagnose(con), "low-occupancy")
    finally:
        con.close()
    assert qwen.metrics["large_output_gemm_pct"] >= 99.0
    assert _signal(qwen, "small-grid GEMM time with small work").verdict == "neutral"
    # 596-682 TFLOP/s of 989.4 (raw trace / data sheet): 60-69 % of the roof, neither far nor near
    roof = _signal(qwen, "small-grid ops' achieved share of the roofline")
    assert 60 <= roof.value <= 69 and roof.verdict == "neutral"
    assert any("Autotune the GEMM tiles" in x.action for x in qwen.fixes)


def test_op_roofline_matches_tracelens_on_sglang(tmp_path: Path) -> None:
    """The op rows over all kernels of the SGLang prefill trace (MI300X) against TraceLens's
    GEMM.csv: FLOPs per op, ops, achieved TFLOP/s (FLOPs x count / summed kernel time) and
    FLOP/byte per aten::mm shape; the peak and ridge point from AMD's MI300X data sheet."""
    _skip_absent(SGLANG, SGLANG_GEMM)
    with SGLANG_GEMM.open() as f:
        oracle = {
            (int(r["param: M"]), int(r["param: N"]), int(r["param: K"])): r
            for r in csv.DictReader(f)
            if r["name"] == "aten::mm"
        }
    assert len(oracle) == 5
    con = shared_ingested([SGLANG], tmp_path / "ws.duckdb")
    try:
        ctx = Ctx(con, resolve_thresholds(None))
        got = op_roofline.op_evidence(
            ctx, "ops", "all kernels", "SELECT rank, correlation_id, name, duration_ns FROM kernels"
        )
    finally:
        con.close()
    assert got is not None
    rows = {(r["m"], r["n"], r["k"]): r for r in got[1] if r["op"] == "aten::mm"}
    assert set(rows) == set(oracle)
    for shape, o in oracle.items():
        r = rows[shape]
        gflops, n, us = float(o["GFLOPS_first"]), int(o["name_count"]), float(o["Kernel Time (µs)_sum"])
        assert r["ops"] == n
        assert r["flops_per_op"] == pytest.approx(gflops * 1e9)
        assert r["tflops_per_s"] == pytest.approx(gflops * n / us * 1e3, abs=0.01)  # GFLOP/us = 1e3 TFLOP/s
        assert r["intensity"] == pytest.approx(float(o["FLOPS/Byte_first"]), abs=0.06)
        assert (r["peak_precision"], r["peak_tflops"]) == ("bf16", MI300X_BF16[0])
        assert r["ridge_flop_per_byte"] == pytest.approx(MI300X_BF16[0] * 1e3 / MI300X_BF16[1], abs=0.051)


def test_attention_shape_signal_from_the_raw_trace(tmp_path: Path) -> None:
    """dominant-kernel's attention signals on BERT-small's flash kernel: B, H, L, D and the causal
    flag of aten::_flash_attention_forward as the raw trace records them ([B, L, H, D] `Input
    Dims`, is_causal the 9th `Concrete Inputs`), its FLOPs 4*B*H*L*L*D over its kernel time."""
    _skip_absent(BERT)
    with gzip.open(BERT, "rt") as f:
        events = json.load(f)["traceEvents"]
    ops = [e for e in events if e.get("cat") == "cpu_op" and e["name"] == "aten::_flash_attention_forward"]
    ext = {e["args"]["External id"] for e in ops}
    ks = [e for e in events if e.get("cat") == "kernel" and e["args"].get("External id") in ext]
    b, seq, h, d = ops[0]["args"]["Input Dims"][0]
    causal = ops[0]["args"]["Concrete Inputs"][8]
    assert causal == "False" and len({k["name"] for k in ks}) == 1
    tflops = len(ops) * 4 * b * h * seq * seq * d / (sum(k["dur"] for k in ks) * 1e3) / 1e3
    con = shared_ingested([BERT], tmp_path / "ws.duckdb")
    try:
        ev: list = []
        ctx = Ctx(con, resolve_thresholds(None))
        safe = ks[0]["name"].replace("'", "''")
        signals = dominant_kernel._dominant_shapes(ctx, ev, safe, "attention")
    finally:
        con.close()
    (row,) = ev[0].rows
    assert (row["attn_b"], row["attn_h"], row["attn_l"], row["attn_d"], row["causal"]) == (
        b,
        h,
        seq,
        d,
        False,
    )
    assert row["tflops_per_s"] == pytest.approx(tflops, abs=0.006)
    shape = next(s for s in signals if s.name == "attention shape (B, H, L, D)")
    assert shape.value == f"{b}x{h}x{seq}x{d}" and "not causal" in shape.note
    assert shape.verdict == "neutral"  # L = 141: short sequences, not the long-sequence case
    roof = next(s for s in signals if s.name == "its ops' achieved share of the roofline")
    assert roof.verdict == "supports" and roof.value < 50


# ------------------------------------------------------------------------------------------------
# A hand-built unfused attention: bmm -> softmax -> bmm, shapes known by construction

GEMM = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_nn"
SOFTMAX = (
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, c10::BFloat16, "
    "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, int)"
)
QK = [[16, 1024, 64], [16, 64, 1024]]  # Q [B*H, L, D] @ K^T [B*H, D, L]
PV = [[16, 1024, 1024], [16, 1024, 64]]  # P [B*H, L, L] @ V [B*H, L, D]
GEMM_US = 300


def _attention_trace(path: Path, record_shapes: bool) -> Path:
    """One unfused attention on an H100 (132 SMs): two bf16 bmm ops and a softmax, each with its
    launch and kernel (grid 64 blocks) on one stream; with record_shapes, `Input Dims` and types."""

    def op(name, ts, dur, ext, dims):
        shapes = (dims, ["c10::BFloat16"] * len(dims)) if record_shapes else (None, None)
        return op_dict(name, ts, dur, ext, *shapes)

    launch, kernel = launch_dict, kernel_dict

    score = [2, 8, 1024, 1024]
    events = [
        op("aten::bmm", 100, 20, 1, QK),
        launch(105, 11, 1),
        op("aten::_softmax", 132, 25, 3, [score]),
        launch(140, 12, 3),
        op("aten::bmm", 170, 20, 4, PV),
        launch(175, 13, 4),
        kernel(GEMM, 200, GEMM_US, 11, 1),
        kernel(SOFTMAX, 502, 400, 12, 3),
        kernel(GEMM, 904, GEMM_US, 13, 4),
    ]
    props = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85_045_870_592, "computeMajor": 9,
              "computeMinor": 0, "numSms": 132}]  # fmt: skip
    return write_trace(path, events, deviceProperties=props)


def test_unfused_attention_gemms_are_below_the_ridge(tmp_path: Path) -> None:
    con = ingested([_attention_trace(tmp_path / "rank0.pt.trace.json", True)], tmp_path / "ws.duckdb")
    try:
        findings = diagnose(con)
    finally:
        con.close()
    # by construction: each bmm is 2 * 16 * 1024 * 1024 * 64 FLOPs over (2 x 16*1024*64 + 16*1024*1024)
    # bf16 elements (2 bytes), in one 300 us kernel
    flops = 2 * 16 * 1024 * 1024 * 64
    nbytes = (2 * 16 * 1024 * 64 + 16 * 1024 * 1024) * 2
    tflops = flops / (GEMM_US * 1e3) / 1e3
    f = _finding(findings, "unfused-attention")
    rows = _evidence(f, "shapes of the sequences' GEMMs").rows
    assert sorted((r["m"], r["n"], r["k"]) for r in rows) == [(1024, 64, 1024), (1024, 1024, 64)]
    for r in rows:
        assert (r["op"], r["batch"], r["ops"], r["kernel_ns"]) == ("aten::bmm", 16, 1, GEMM_US * 1000)
        assert r["flops_per_op"] == flops
        assert r["intensity"] == round(flops / nbytes, 1)
        assert r["tflops_per_s"] == round(tflops, 2)
        assert (r["peak_tflops"], r["ridge_flop_per_byte"]) == (H100_BF16[0], 295.3)
    # intensity 56.9 FLOP/byte < 295.3: both GEMMs memory bound
    s = _signal(f, "sequence GEMMs below the ridge point")
    assert (s.value, s.verdict) == (100.0, "supports")
    # the GEMM kernel is 600 of 1000 us of kernel time: dominant-kernel; its ops' share of the roof
    # is the achieved rate over min(989.4, 56.9 FLOP/byte x 3350 GB/s)
    d = _finding(findings, "dominant-kernel")
    roof = _signal(d, "its ops' achieved share of the roofline")
    attainable = min(H100_BF16[0], round(flops / nbytes, 1) * H100_BF16[1] / 1e3)
    assert roof.value == pytest.approx(100 * tflops / attainable, abs=0.1) and roof.verdict == "supports"
    # low-occupancy (64 blocks < 132 SMs): Q K^T has 16 x 8 x 8 = 1024 output tiles (large output),
    # P V 16 x 8 x 1 = 128 < 132 but x ceil(1024 / 256) = 512 with K split; each half the GEMM time
    occ = _finding(findings, "low-occupancy")
    assert (occ.metrics["small_work_gemm_pct"], occ.metrics["split_k_gemm_pct"]) == (0.0, 50.0)
    assert occ.metrics["large_output_gemm_pct"] == 50.0
    assert any(x.action.startswith("Split K") for x in occ.fixes)


def test_without_shapes_no_roofline_evidence(tmp_path: Path) -> None:
    """The same trace without record_shapes: no op rows, so no shape evidence, signal or metric."""
    con = ingested([_attention_trace(tmp_path / "rank0.pt.trace.json", False)], tmp_path / "ws.duckdb")
    try:
        findings = diagnose(con)
    finally:
        con.close()
    for fid in ("unfused-attention", "dominant-kernel", "low-occupancy"):
        f = _finding(findings, fid)
        assert not any(e.name.startswith("shapes of the") for e in f.evidence), fid
        assert not any("roofline" in s.name or "ridge" in s.name for s in f.signals), fid
    assert "small_work_gemm_pct" not in _finding(findings, "low-occupancy").metrics
