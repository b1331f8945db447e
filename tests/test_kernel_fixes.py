"""Kernel-level findings (rules/kernel_fixes.py): fusion candidates, unfused attention, GEMM
precision, CUDA-graph candidates.

Expected values come from two independent places:
* the generator's ground truth (`ground_truth.json` -> `kernel_faults`, computed in Python from the
  generated events, not by the SQL): each injection must be found with its ranks, steps and
  recoverable time;
* the real nsys-ai H100 capture read with sqlite3 directly (kernel names and durations as nsys
  stored them), and the dense peaks of data/gpus.csv.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from conftest import TRACES, ingested, requires_shared, synth_cases

from nsight_analyze import gpus
from nsight_analyze.diagnose import diagnose
from nsight_analyze.errors import UserError
from nsight_analyze.gpus import table as gpu_table

SYN = dict(ranks=2, gpus_per_node=2, steps=4, seed=3)
CASES = {
    "clean": [],
    "unfused-elementwise": ["unfused-elementwise=2-3"],
    "fp32-gemm": ["fp32-gemm=25"],
    "unfused-attention": ["unfused-attention"],
    "launch-bound-graphs": ["launch-bound=2-3", "cuda-graph"],
}
KERNEL_IDS = ("fusion-candidates", "unfused-attention", "gemm-precision", "cuda-graph-candidates")
H100 = TRACES / "nsys" / "nsys-ai" / "h100_2gpu_1s.sqlite"


@pytest.fixture
def synthetic(synth_diagnosis):
    """case -> (findings, truth, SynthJob): generated, ingested and diagnosed once per test run."""
    return synth_cases(synth_diagnosis, CASES, SYN)


def _finding(findings, fid):
    ids = [f.id for f in findings]
    assert fid in ids, f"{fid} not found: {ids}"
    return next(f for f in findings if f.id == fid)


def _worst_rank_per_step(rows: list[dict], field: str) -> float:
    """Sum over steps of the largest rank value, / the job's steps (docs/diagnose.md convention)."""
    per_step: dict = {}
    for r in rows:
        per_step[r["step"]] = max(per_step.get(r["step"], 0), r[field])
    return sum(per_step.values()) / SYN["steps"]


def test_clean_run_is_quiet(synthetic):
    findings, _, _ = synthetic("clean")
    assert findings.job["rule_errors"] == []
    assert not [f.id for f in findings if f.id in KERNEL_IDS]


def test_unfused_elementwise_is_a_fusion_candidate(synthetic):
    findings, truth, _ = synthetic("unfused-elementwise")
    rows = truth["kernel_faults"]["unfused_elementwise"]
    f = _finding(findings, "fusion-candidates")
    assert f.steps == sorted({r["step"] for r in rows}) == [2, 3]  # the injected range (CASES: =2-3)
    assert f.ranks == sorted({r["rank"] for r in rows}) == list(range(SYN["ranks"]))
    # the chains found are exactly the injected ones (the clean workload has none this long)
    assert f.metrics["chains"] == sum(r["chains"] for r in rows)
    assert f.metrics["chain_kernels"] == sum(r["kernels"] for r in rows)
    expected = _worst_rank_per_step(rows, "recoverable_ns")
    assert expected > 0
    assert f.recoverable_ns_per_step == pytest.approx(expected, rel=0.02)
    assert f.severity != "info" and f.evidence[0].rows and all(x.trade_off for x in f.fixes)
    assert any("torch.compile" in x.action for x in f.fixes)
    assert any("register" in x.trade_off for x in f.fixes)


def test_fp32_gemms_get_a_precision_finding_bounded_by_the_dense_peaks(synthetic):
    findings, truth, _ = synthetic("fp32-gemm")
    rows = truth["kernel_faults"]["fp32_gemm"]
    f = _finding(findings, "gemm-precision")
    # the synthetic GPU is an H100 80GB HBM3 -> table row H100 SXM: FP32 66.9, BF16 989.4 dense TFLOP/s
    peak = gpu_table.model_peak("NVIDIA H100 SXM").tflops
    factor = 1 - peak["fp32"] / peak["bf16"]
    assert f.metrics["gpu_models"] == ["NVIDIA H100 SXM"]
    assert f.metrics["gain_factor_fp32"] == pytest.approx(factor, abs=1e-4)
    per_rank: dict[int, int] = {}
    for r in rows:
        per_rank[r["rank"]] = per_rank.get(r["rank"], 0) + r["kernel_ns"]
    assert f.metrics["fp32_gemm_ns_total"] == sum(per_rank.values())
    expected = max(per_rank.values()) * factor / SYN["steps"]
    assert f.recoverable_ns_per_step == pytest.approx(expected, rel=0.01)
    assert f.ranks == sorted(per_rank)
    assert any("bfloat16" in x.action for x in f.fixes) and any("mantissa" in x.trade_off for x in f.fixes)
    # the injected FP32 work is known: 25 % of the layer GEMMs, 2*M*N*K FLOPs each
    assert all(r["flops"] > 0 for r in rows)


def test_a_gpu_without_bf16_is_bounded_by_its_fp16_peak(synthetic):
    """V100 has FP16 tensor cores and no BF16 (data/gpus.csv): the 16-bit peak is fp16's (the rule
    reads plain peak rows now; in a DataFrame a missing bf16 was NaN, which defeated this
    fallback when another rank of the job had a bf16 peak)."""
    from nsight_analyze.store.workspace import open_workspace

    _, _, job = synthetic("fp32-gemm")
    con = open_workspace(job.db, read_only=True)
    try:
        with gpus.stated_gpu("V100"):
            f = _finding(diagnose(con), "gemm-precision")
    finally:
        con.close()
    peak = gpu_table.model_peak("Tesla V100-SXM2").tflops  # the table's row: FP32 15.7, FP16 125
    assert peak.get("bf16") is None
    assert f.metrics["gpu_models"] == ["Tesla V100-SXM2"] and f.metrics["peak_source"] == "table"
    assert f.metrics["gain_factor_fp32"] == pytest.approx(1 - peak["fp32"] / peak["fp16"], abs=1e-4)
    assert f.metrics["recoverable_ns_per_step_low"] == f.recoverable_ns_per_step  # one model: no range


def test_unfused_attention_is_found(synthetic):
    findings, truth, _ = synthetic("unfused-attention")
    rows = truth["kernel_faults"]["unfused_attention"]
    f = _finding(findings, "unfused-attention")
    assert f.steps == sorted({r["step"] for r in rows}) == list(range(1, SYN["steps"] + 1))
    assert f.metrics["sequences"] == sum(r["chains"] for r in rows)
    expected = _worst_rank_per_step(rows, "recoverable_ns")
    assert f.recoverable_ns_per_step == pytest.approx(expected, rel=0.02)
    assert f.severity != "info"
    assert f.signals[0].verdict == "supports"  # no flash kernel left in the job
    assert any("scaled_dot_product_attention" in x.action for x in f.fixes)
    # hand computation from the generator's shape (synth/workload.Config: batch 1, 16 heads,
    # sequence 4096, bf16): the score matrix is b*h*n^2*2 bytes; the ground truth agrees
    from nsight_analyze.synth.workload import Config
    from nsight_analyze.synth.writer import GPU_TOTAL_MEMORY

    heads, seq = Config().heads, Config().seq
    score = 1 * heads * seq**2 * 2
    assert {r["score_matrix_bytes"] for r in rows} == {score}
    # the finding reads it from the emit_nvtx shapes around the softmax launches and the bf16 name
    assert f.metrics["score_matrix_bytes"] == score
    shapes = next(e for e in f.evidence if e.name == "score-matrix shapes")
    assert {tuple(r["dims"]) for r in shapes.rows} == {(1, heads, seq, seq)}
    # against the generated GPU's memory (TARGET_INFO_GPU.totalMemory, synth/writer.py)
    expected_pct = round(100.0 * score / GPU_TOTAL_MEMORY, 2)
    assert f.metrics["score_matrix_pct_of_gpu_memory"] == expected_pct


def test_launch_bound_region_outside_graphs_is_a_graph_candidate(synthetic):
    findings, truth, job = synthetic("launch-bound-graphs")
    f = _finding(findings, "cuda-graph-candidates")
    # the launch-bound range (CASES: launch-bound=2-3), on every rank of the job (SYN)
    assert f.steps == [2, 3] and f.ranks == list(range(SYN["ranks"]))
    # ground truth: per step the worst rank's launch-gap + host-bound idle (docs/metrics.md); the
    # candidate regions hold nearly all of it (the 3000 one-by-one launches), never more
    per_step: dict = {}
    for r in truth["partition"]:
        if r["step"] is not None:
            per_step[r["step"]] = max(per_step.get(r["step"], 0), r["launch_gap_ns"] + r["host_bound_ns"])
    expected = sum(per_step.values()) / SYN["steps"]
    assert 0.95 * expected <= f.recoverable_ns_per_step <= expected * 1.001
    # coverage: the share of kernels replayed from graphs, counted in the nsys exports themselves
    graph = total = 0
    for path in sorted(job.traces.glob("*.sqlite")):
        raw = sqlite3.connect(path)
        g, n = raw.execute("SELECT count(graphNodeId), count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
        raw.close()
        graph, total = graph + g, total + n
    assert 0 < graph < total
    # graph_coverage counts the kernels of the step windows only: not the generator's prologue
    # kernels (synth/programs.prologue: the GPU items it runs on each rank before the first step)
    from nsight_analyze.synth import programs, workload

    prologue = int(programs.prologue(workload.Catalog()).has_gpu.sum()) * SYN["ranks"]
    assert f.metrics["graph_launch_pct"] == round(100.0 * graph / (total - prologue), 2)
    assert f.metrics["graph_launches"] > 0
    assert any("static shapes" in x.trade_off and "memory pool" in x.trade_off for x in f.fixes)


@requires_shared
def test_h100_trace_gets_a_precision_finding(tmp_path):
    raw = sqlite3.connect(H100)
    # every sm80_xmma FP32 (ffma) GEMM in the capture, and every GEMM (a name holding "gemm"), read
    # straight from the nsys export
    fp32_ns, gemm_ns = raw.execute(
        """SELECT sum(k.end - k.start) FILTER (WHERE s.value LIKE 'sm80_xmma_gemm_f32f32_f32f32_f32%ffma%'),
                  sum(k.end - k.start) FILTER (WHERE s.value LIKE '%gemm%')
           FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName"""
    ).fetchone()
    raw.close()
    assert fp32_ns > 0
    con = ingested([H100], tmp_path / "ws.duckdb")
    try:
        findings = diagnose(con)
    finally:
        con.close()
    assert findings.job["rule_errors"] == []
    f = _finding(findings, "gemm-precision")
    assert f.metrics["fp32_gemm_ns_total"] == fp32_ns
    # FP32 share of the GEMM time, from the sqlite3 sums above (rounded to 0.1 as the metric is)
    assert f.metrics["fp32_tf32_share_of_gemm_pct"] == round(100.0 * fp32_ns / gemm_ns, 1)
    # GPU not recorded: the bound is the most favourable ampere-or-newer table model
    assert f.metrics["gpu_models"] and "NVIDIA H100 SXM" in f.metrics["gpu_models"]
    assert f.metrics["recoverable_ns_per_step_low"] < f.recoverable_ns_per_step <= fp32_ns


@pytest.mark.parametrize(
    "name, expected",
    [
        # names from the shared traces (nsys-ai H100, TraceLens H100, synthetic catalogue) and cuBLAS
        ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4", "fp32"),
        ("sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x16_stage4", "tf32"),
        ("ampere_sgemm_128x64_nn", "fp32"),
        ("ampere_s1688gemm_128x128_ldg4_stages_64x3_tn", "tf32"),
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64", "bf16"),
        ("ampere_h16816gemm_256x128_ldg8_stages_32x3_nn", "fp16"),
        ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNT", None),
    ],
)
def test_gemm_precision_from_names(name, expected):
    import duckdb

    from nsight_analyze.store import query_layer

    con = duckdb.connect()
    con.execute(next(q.sql for q in query_layer.layer() if q.name == "gemm_precision"))
    assert con.execute("SELECT gemm_precision(?)", [name]).fetchone()[0] == expected


@pytest.mark.parametrize(
    "spec", ["fp32-gemm=0", "fp32-gemm=150", "fp32-gemm=x", "unfused-elementwise=5-3", "unfused-attention=1"]
)
def test_bad_kernel_injection_is_one_line(spec):
    from nsight_analyze.synth.injections import parse

    with pytest.raises(UserError) as exc:
        parse([spec])
    assert "\n" not in str(exc.value) and spec in str(exc.value)


GEMM = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_nn"
SOFTMAX = (
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, c10::BFloat16, "
    "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, int)"
)
SCORE_DIMS = [2, 8, 1024, 1024]  # b, h, n, n of the score matrix in the trace below
GPU_MEMORY = 85_045_870_592  # deviceProperties totalGlobalMem of the trace below (an H100 80GB)


def _kineto_attention_trace(path: Path, record_shapes: bool) -> Path:
    """A PyTorch-profiler trace of one unfused attention: bmm -> softmax -> bmm kernels on one
    stream, their cudaLaunchKernel calls, and the aten ops around them (External id links each
    op to its launch and kernel, as Kineto writes them; with record_shapes, `Input Dims`)."""
    from test_kineto import kernel_dict, launch_dict, op_dict, write_trace

    def op(name, ts, dur, ext, dims):
        shapes = (dims, ["c10::BFloat16"] + ["Scalar"] * (len(dims) - 1)) if record_shapes else (None, None)
        return op_dict(name, ts, dur, ext, *shapes)

    launch, kernel = launch_dict, kernel_dict

    qk, pv = [[16, 1024, 64], [16, 64, 1024]], [[16, 1024, 1024], [16, 1024, 64]]
    events = [
        op("aten::bmm", 100, 20, 1, qk),
        launch(105, 11, 1),
        op("aten::softmax", 130, 30, 2, [SCORE_DIMS, [], []]),
        op("aten::_softmax", 132, 25, 3, [SCORE_DIMS, [], []]),  # innermost: launches the kernel
        launch(140, 12, 3),
        op("aten::bmm", 170, 20, 4, pv),
        launch(175, 13, 4),
        kernel(GEMM, 200, 300, 11, 1),
        kernel(SOFTMAX, 502, 400, 12, 3),
        kernel(GEMM, 904, 300, 13, 4),
    ]
    props = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": GPU_MEMORY, "computeMajor": 9,
              "computeMinor": 0, "numSms": 132}]  # fmt: skip
    return write_trace(path, events, deviceProperties=props)


@pytest.mark.parametrize("fast", [True, False], ids=["duckdb", "ijson"])
def test_kineto_record_shapes_give_the_score_matrix_size(tmp_path: Path, monkeypatch, fast: bool) -> None:
    from nsight_analyze.sources import kineto

    monkeypatch.setattr(kineto, "FAST_PATH", fast)
    con = ingested([_kineto_attention_trace(tmp_path / "rank0.pt.trace.json", True)], tmp_path / "ws.duckdb")
    try:
        rows = con.execute(
            "SELECT op, dims, elem_bytes, score_bytes, shape_source, gpu_memory_bytes, pct_of_gpu_memory "
            "FROM attention_scores"
        ).fetchall()
        findings = diagnose(con)
    finally:
        con.close()
    # hand computation: b*h*n^2*bytes = 2 * 8 * 1024 * 1024 * 2 (SCORE_DIMS; 2 bytes per
    # BFloat16, the op's Input type)
    score = 2 * 8 * 1024 * 1024 * 2
    assert score == 33_554_432
    assert rows == [
        (
            "aten::_softmax",
            SCORE_DIMS,
            2,  # bytes per BFloat16 element
            score,
            "kineto record_shapes",
            GPU_MEMORY,
            pytest.approx(100 * score / GPU_MEMORY),
        )
    ]
    f = _finding(findings, "unfused-attention")
    assert f.metrics["score_matrix_bytes"] == score
    assert f.metrics["score_matrix_pct_of_gpu_memory"] == round(100.0 * score / GPU_MEMORY, 2)
    assert "kineto record_shapes" in f.metrics["score_matrix_note"]
    assert any(e.name == "score-matrix shapes" and e.rows for e in f.evidence)


def test_kineto_without_record_shapes_says_how_to_get_the_size(tmp_path: Path) -> None:
    con = ingested([_kineto_attention_trace(tmp_path / "rank0.pt.trace.json", False)], tmp_path / "ws.duckdb")
    try:
        assert con.execute("SELECT count(*) FROM attention_scores").fetchone()[0] == 0
        f = _finding(diagnose(con), "unfused-attention")
    finally:
        con.close()
    assert f.metrics["score_matrix_bytes"] is None
    assert "record_shapes=True" in f.metrics["score_matrix_note"]
