"""FLOPs from shapes (queries/hfu/op_flops.sql) and the model FLOPs MFU reads from them.

Expected values come from two independent places:
* hand counts (2*M*N*K and the other formulas of docs/metrics.md "FLOPs from shapes", written out
  as integer arithmetic in each test) on a small PyTorch-profiler trace written here, whose ops,
  launches and kernels are laid out as Kineto writes them;
* AMD TraceLens's stored reference outputs for its inference traces
  (`oracles/tracelens/tracelens__inference__*/perf_csvs/GEMM.csv`: per-op `GFLOPS_first`,
  `Data Moved (MB)_first` (MiB), `name_count`, `Kernel Time (µs)_mean`), read with csv here.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from conftest import TRACES, ingested, requires_shared

from nsight_analyze import mfu

BF16 = "c10::BFloat16"
GPU_NAME = "NVIDIA H100 80GB HBM3"
KERNEL_US = 10  # every kernel of the trace below runs 10 µs


def _events() -> tuple[list[dict], dict[str, int], dict[str, int]]:
    """The trace's events, the hand-counted FLOPs of each leaf op (by a label) and its bytes.

    One host thread (tid 9), one stream; each op launches one kernel 1 µs into its span; ops are
    20 µs apart; ProfilerStep#1 holds them all (one NVTX step)."""
    events: list[dict] = []
    flops: dict[str, int] = {}
    nbytes: dict[str, int] = {}
    ext = iter(range(1, 1000))
    corr = iter(range(100, 1000))
    t = [1000]  # µs: the next op's start

    def op(name, dims, types, concrete=None, dur=12, inner=None):
        """An op at the current time (with `inner` nested inside it, 1 µs in) and, for a leaf,
        its launch and kernel; returns nothing, moves the clock."""
        start = t[0]
        args = {"External id": next(ext), "Input Dims": dims, "Input type": types}
        if concrete is not None:
            args["Concrete Inputs"] = concrete
        events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 9, "tid": 9, "ts": start,
                       "dur": dur, "args": args})  # fmt: skip
        if inner is None:
            c = next(corr)
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9,
                           "ts": start + 1, "dur": 2, "args": {"correlation": c,
                           "External id": args["External id"]}})  # fmt: skip
            events.append({"ph": "X", "cat": "kernel", "name": f"kernel_of_{name}", "pid": 0, "tid": 7,
                           "ts": start + 5, "dur": KERNEL_US, "args": {"device": 0, "stream": 7,
                           "correlation": c, "External id": args["External id"], "grid": [8, 1, 1],
                           "block": [128, 1, 1]}})  # fmt: skip
        else:
            t[0] = start + 1
            inner()
        t[0] = start + 20

    # aten::mm [128, 256] x [256, 512], bf16: 2*M*N*K; bytes (M*K + K*N + M*N) * 2
    op("aten::mm", [[128, 256], [256, 512]], [BF16, BF16])
    flops["mm"], nbytes["mm"] = 2 * 128 * 512 * 256, (128 * 256 + 256 * 512 + 128 * 512) * 2
    # aten::bmm [8, 64, 32] x [8, 32, 16], float: 2*B*M*N*K; bytes (B*M*K + B*K*N + B*M*N) * 4
    op("aten::bmm", [[8, 64, 32], [8, 32, 16]], ["float", "float"])
    flops["bmm"], nbytes["bmm"] = 2 * 8 * 64 * 16 * 32, (8 * 64 * 32 + 8 * 32 * 16 + 8 * 64 * 16) * 4
    # aten::linear with bias, as a leaf: input [4, 8, 64], weight [32, 64], bias [32]:
    # 2 * (4*8) * 32 * 64 + (4*8) * 32; bytes (4*8*64 + 32*64 + 32 + 4*8*32) * 2
    op("aten::linear", [[4, 8, 64], [32, 64], [32]], [BF16] * 3)
    flops["linear"] = 2 * 32 * 32 * 64 + 32 * 32
    nbytes["linear"] = (4 * 8 * 64 + 32 * 64 + 32 + 4 * 8 * 32) * 2
    # aten::linear -> aten::addmm (how PyTorch runs it): only the addmm counts (bias [32], mat1
    # [32, 64], mat2 [64, 32]): 2*32*32*64 + 32*32
    op(
        "aten::linear",
        [[4, 8, 64], [32, 64], [32]],
        [BF16] * 3,
        inner=lambda: op(
            "aten::addmm", [[32], [32, 64], [64, 32], [], []], [BF16] * 3 + ["Scalar"] * 2, dur=8
        ),
    )
    flops["addmm"] = 2 * 32 * 32 * 64 + 32 * 32
    nbytes["addmm"] = (32 + 32 * 64 + 64 * 32 + 32 * 32) * 2
    # aten::convolution input [2, 3, 32, 32], weight [16, 3, 3, 3], bias [16], stride 1, padding 1,
    # dilation 1: out 32x32; 2 * N * Cout * Hout*Wout * Cin/groups * kh*kw
    conv_args = ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]
    op(
        "aten::convolution",
        [[2, 3, 32, 32], [16, 3, 3, 3], [16], [], [], [], [], [], []],
        ["float"] * 3,
        conv_args,
    )
    flops["conv"] = 2 * 2 * 16 * (32 * 32) * 3 * (3 * 3)
    nbytes["conv"] = (2 * 3 * 32 * 32 + 16 * 3 * 3 * 3 + 16 + 2 * 16 * 32 * 32) * 4
    # grouped, strided: input [1, 8, 15, 15], weight [8, 2, 3, 3], groups 4, stride 2, no padding:
    # Hout = floor((15 - 2 - 1) / 2) + 1 = 7; 2 * 1 * 8 * 7*7 * (8/4) * 3*3
    grouped = ["", "", "", "[2, 2]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "4"]
    op(
        "aten::convolution",
        [[1, 8, 15, 15], [8, 2, 3, 3], [], [], [], [], [], [], []],
        ["float", "float", ""],
        grouped,
    )
    flops["conv_grouped"] = 2 * 1 * 8 * (7 * 7) * 2 * (3 * 3)
    nbytes["conv_grouped"] = (1 * 8 * 15 * 15 + 8 * 2 * 3 * 3 + 1 * 8 * 7 * 7) * 4
    # SDPA -> flash -> _flash_attention_forward (q, k, v [B, L, H, D] = [2, 128, 4, 64], causal):
    # 4 * B * H * Lq * Lk * D / 2; bytes q + k + v + out, each 2*128*4*64 bf16
    qkv = [[2, 128, 4, 64]] * 3

    def flash():
        concrete = ["", "", "", "", "", "128", "128", "0.", "True", "False", "0.125"]  # is_causal: 9th
        op("aten::_flash_attention_forward", [*qkv, *[[]] * 8], [BF16] * 3 + ["Scalar"] * 8, concrete, dur=8)

    bhld = [[2, 4, 128, 64]] * 3
    op(
        "aten::scaled_dot_product_attention",
        [*bhld, [], [], [], [], []],
        [BF16] * 3 + [""] + ["Scalar"] * 4,
        ["", "", "", "", "0.", "True", "0.125", "False"],
        dur=16,
        inner=lambda: op(
            "aten::_scaled_dot_product_flash_attention",
            [*bhld, [], [], [], []],
            [BF16] * 3 + ["Scalar"] * 4,
            ["", "", "", "0.", "True", "False", "0.125"],
            dur=12,
            inner=flash,
        ),
    )
    flops["flash"] = 4 * 2 * 4 * 128 * 128 * 64 // 2
    nbytes["flash"] = 4 * (2 * 128 * 4 * 64) * 2
    # efficient attention, not causal, Lq 16 != Lk 24: q [1, 2, 16, 32], k, v [1, 2, 24, 32]:
    # 4 * B * H * Lq * Lk * D
    op(
        "aten::_scaled_dot_product_efficient_attention",
        [[1, 2, 16, 32], [1, 2, 24, 32], [1, 2, 24, 32], [], [], [], [], []],
        [BF16] * 3 + [""] + ["Scalar"] * 4,
        ["", "", "", "", "False", "0.", "False", "0.125"],
    )
    flops["efficient"] = 4 * 1 * 2 * 16 * 24 * 32
    nbytes["efficient"] = (1 * 2 * 16 * 32 + 2 * (1 * 2 * 24 * 32) + 1 * 2 * 16 * 32) * 2
    # the same without Concrete Inputs: the causal flag is unknown, so are the FLOPs
    op(
        "aten::_scaled_dot_product_efficient_attention",
        [[1, 2, 16, 32], [1, 2, 24, 32], [1, 2, 24, 32], [], [], [], [], []],
        [BF16] * 3 + [""] + ["Scalar"] * 4,
    )
    step = {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 9, "tid": 9, "ts": 990,
            "dur": t[0] - 990 + 30, "args": {"External id": 999}}  # fmt: skip
    return [step, *events], flops, nbytes


def _trace(path: Path) -> tuple[Path, dict[str, int], dict[str, int]]:
    events, flops, nbytes = _events()
    props = [{"id": 0, "name": GPU_NAME, "totalGlobalMem": 85_045_870_592, "computeMajor": 9,
              "computeMinor": 0, "numSms": 132}]  # fmt: skip
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": props, "traceEvents": events}))
    return path, flops, nbytes


@pytest.fixture(params=[True, False], ids=["duckdb", "ijson"])
def shaped(request, tmp_path: Path, monkeypatch):
    """The trace above ingested by the fast path and by the ijson fallback."""
    from nsight_analyze.sources import kineto

    monkeypatch.setattr(kineto, "FAST_PATH", request.param)
    path, flops, nbytes = _trace(tmp_path / "rank0.pt.trace.json")
    con = ingested([path], tmp_path / "ws.duckdb")
    yield con, flops, nbytes
    con.close()


def test_leaf_ops_get_hand_counted_flops_and_bytes(shaped) -> None:
    con, flops, nbytes = shaped
    rows = con.execute(
        "SELECT op, kind, flops, bytes, kernels, kernel_ns, tflops_per_s, intensity, causal, dtype "
        "FROM op_flops ORDER BY start_ns"
    ).fetchall()
    # leaf ops only: the outer linear, SDPA and _scaled_dot_product_flash_attention are not rows
    assert [r[0] for r in rows] == [
        "aten::mm", "aten::bmm", "aten::linear", "aten::addmm", "aten::convolution", "aten::convolution",
        "aten::_flash_attention_forward", "aten::_scaled_dot_product_efficient_attention",
        "aten::_scaled_dot_product_efficient_attention",
    ]  # fmt: skip
    labels = ["mm", "bmm", "linear", "addmm", "conv", "conv_grouped", "flash", "efficient"]
    for label, row in zip(labels, rows, strict=False):
        assert row[2] == flops[label], label
        assert row[3] == nbytes[label], label
        assert row[4] == 1 and row[5] == KERNEL_US * 1000, label  # its one kernel, 10 µs
        # achieved TFLOP/s = FLOPs / kernel time; intensity = FLOPs / bytes
        assert row[6] == pytest.approx(flops[label] / (KERNEL_US * 1e-6) / 1e12), label
        assert row[7] == pytest.approx(flops[label] / nbytes[label]), label
    assert [r[1] for r in rows] == ["gemm"] * 4 + ["conv"] * 2 + ["attention"] * 3
    assert rows[6][8] is True and rows[7][8] is False  # causal flags from Concrete Inputs
    assert rows[8][2] is None and rows[8][8] is None  # no Concrete Inputs: causal and FLOPs unknown
    assert rows[0][9] == BF16 and rows[1][9] == "float"
    mm = con.execute("SELECT batch, m, n, k FROM op_flops WHERE op = 'aten::mm'").fetchone()
    assert mm == (1, 128, 512, 256)  # the Input Dims above


def test_mfu_reads_the_trace_flops_and_the_users_value_wins(shaped) -> None:
    con, flops, _ = shaped
    total = sum(flops.values())  # every counted op runs in step 1 (hand counts above)
    summary = mfu.hfu_mfu_summary(con)
    model = summary["model_flops"]
    assert model["source"] == "from trace shapes" and model["formula"] == "trace"
    assert model["per_step"] == total
    assert (
        "from trace shapes" in model["explanation"]
        and "1 op(s) with shapes but no FLOPs" in model["explanation"]
    )
    (window_ns,) = con.execute("SELECT end_ns - start_ns FROM steps").fetchone()  # the one step
    peak = 989.4  # TFLOP/s: data/gpus.csv, H100 SXM dense BF16 (NVIDIA's datasheet)
    assert summary["peaks"][0]["peak_tflops"] == peak
    assert summary["mfu"] == pytest.approx(total / (window_ns * 1e-9 * peak * 1e12))
    assert not any("MFU needs the model FLOPs" in n for n in summary["notes"])

    given = mfu.hfu_mfu_summary(con, model_flops_per_step=1e9)
    assert given["model_flops"]["per_step"] == 1e9
    assert given["model_flops"]["source"] == "--model-flops-per-step"
    assert given["mfu"] == pytest.approx(1e9 / (window_ns * 1e-9 * peak * 1e12))


def test_without_shapes_mfu_still_needs_the_model_flops(tmp_path: Path) -> None:
    events, _, _ = _events()
    for e in events:  # the same trace recorded without record_shapes
        e["args"].pop("Input Dims", None)
        e["args"].pop("Input type", None)
        e["args"].pop("Concrete Inputs", None)
    path = tmp_path / "rank0.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    con = ingested([path], tmp_path / "ws.duckdb")
    try:
        assert con.execute("SELECT count(*) FROM op_flops").fetchone()[0] == 0
        summary = mfu.hfu_mfu_summary(con, gpu="H100 SXM")
    finally:
        con.close()
    assert summary["model_flops"] is None and summary["mfu"] is None
    assert any("MFU needs the model FLOPs" in n for n in summary["notes"])


def test_emit_nvtx_sizes_give_gemm_flops(tmp_path: Path) -> None:
    """The NVTX text nsys --pytorch=autograd-shapes-nvtx (emit_nvtx(record_shapes=True)) writes,
    here as host annotations (they land in `nvtx` as nsys ranges do): GEMM FLOPs from `sizes`, and
    nothing the text does not hold (bytes, dtype: no types in it)."""

    def rng(text, ts, dur):
        return {"ph": "X", "cat": "user_annotation", "name": text, "pid": 9, "tid": 9, "ts": ts, "dur": dur,
                "args": {}}  # fmt: skip

    events = [
        # aten::linear around aten::addmm: only the addmm counts
        rng(
            "aten::linear, seq = 3, op_id = 7, sizes = [[4, 8, 64], [32, 64], [32]], input_op_ids = [(0, 0)]",
            1000,
            30,
        ),
        rng("aten::addmm, op_id = 8, sizes = [[32], [32, 64], [64, 32], [], []]", 1005, 20),
        rng("aten::mm, seq = 4, op_id = 9, sizes = [[128, 256], [256, 512]]", 1040, 20),
        rng("aten::mm, seq = 5, op_id = 10", 1070, 20),  # recorded without shapes: no row
    ]
    for i, ts in enumerate((1006, 1041, 1071)):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9,
                       "ts": ts, "dur": 2, "args": {"correlation": 50 + i}})  # fmt: skip
        kernel_args = {"device": 0, "stream": 7, "correlation": 50 + i}
        events.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": ts + 10,
                       "dur": KERNEL_US, "args": kernel_args})  # fmt: skip
    path = tmp_path / "rank0.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    con = ingested([path], tmp_path / "ws.duckdb")
    try:
        rows = con.execute(
            "SELECT op, m, n, k, flops, bytes, dtype, kernels, shape_source FROM op_flops ORDER BY start_ns"
        ).fetchall()
    finally:
        con.close()
    assert rows == [
        # addmm: 2*M*N*K + M*N with M = 32, N = 32, K = 64; mm: 2*128*512*256
        ("aten::addmm", 32, 32, 64, 2 * 32 * 32 * 64 + 32 * 32, None, None, 1, "emit_nvtx"),
        ("aten::mm", 128, 512, 256, 2 * 128 * 512 * 256, None, None, 1, "emit_nvtx"),
    ]


# ---------------------------------------------------------------------------------------------
# TraceLens's per-op GEMM FLOPs on its own inference traces
# ---------------------------------------------------------------------------------------------
INFERENCE = TRACES / "kineto" / "tracelens" / "inference"
TL = TRACES / "oracles" / "tracelens"
CASES = {
    # trace -> (oracle GEMM.csv, whether its kernels ran in this file)
    "sglang": (
        INFERENCE / "sglang_prefilldecode" / "sglang_Qwen3-8B_prefilldecode.json.gz",
        TL / "tracelens__inference__sglang_prefilldecode" / "perf_csvs" / "GEMM.csv",
        True,
    ),
    # TraceLens merges the HIP-graph capture's ops into the replay: the addmm rows are the capture's
    # (whose launches run nothing), the mm row the replay's
    "vllm_capture": (
        INFERENCE
        / "vllm_decode_full"
        / "capture_traces"
        / "graph_capture_rank_0.1773709742341309550.pt.trace.json.gz",
        TL / "tracelens__inference__vllm_decode_full" / "perf_csvs" / "GEMM.csv",
        False,
    ),  # fmt: skip
    "vllm_replay": (
        INFERENCE / "vllm_decode_full" / "graph_execution.json.gz",
        TL / "tracelens__inference__vllm_decode_full" / "perf_csvs" / "GEMM.csv",
        True,
    ),
}


@requires_shared
@pytest.mark.parametrize("case", sorted(CASES))
def test_per_op_gemm_flops_equal_tracelens(tmp_path: Path, case: str) -> None:
    trace, oracle, ran = CASES[case]
    con = ingested([trace], tmp_path / "ws.duckdb")
    try:
        ours = {
            (op, dims): (n, gflops, mib, us)
            for op, dims, n, gflops, mib, us in con.execute(
                "SELECT op, input_dims::VARCHAR, count(*), any_value(flops) / 1e9, any_value(bytes) / 2^20, "
                "avg(kernel_ns) / 1e3 FROM op_flops GROUP BY ALL"
            ).fetchall()
        }
    finally:
        con.close()
    with oracle.open(newline="") as fh:
        expected = [r for r in csv.DictReader(fh) if r["name"].startswith("aten::")]
    # TraceLens also lists the custom op around each aten op (aiter::gemm_a16w16,
    # vllm::rocm_unquantized_gemm) with the same numbers: we count the leaf aten op only
    mine = [r for r in expected if (r["name"], r["Input Dims_first"]) in ours]
    assert mine, f"no TraceLens GEMM row of {oracle} matches an op of {trace.name}"
    for r in mine:
        n, gflops, mib, us = ours[(r["name"], r["Input Dims_first"])]
        assert gflops == pytest.approx(float(r["GFLOPS_first"]), rel=1e-12), r["name"]
        assert mib == pytest.approx(float(r["Data Moved (MB)_first"]), rel=1e-12), r["name"]
        assert n == int(r["name_count"]), r["name"]
        if ran:  # TraceLens's µs are floats of the JSON's µs; ours are exact ns
            assert us == pytest.approx(float(r["Kernel Time (µs)_mean"]), rel=1e-5), r["name"]
        else:
            assert us is None
    if case == "sglang":  # all five aten::mm shapes of the oracle (36 + 36 + 36 + 36 + 1 ops)
        assert len(mine) == 5 and sum(ours[(r["name"], r["Input Dims_first"])][0] for r in mine) == 145
