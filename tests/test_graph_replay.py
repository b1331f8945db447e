"""Graph replays, annotations and graph capture (issue 52, points 2-4).

* A step boundary never falls inside the GPU work of one host launch (a graph replay) or of one
  annotation: TraceLens's vLLM decode replay (one hipGraphLaunch replaying 421 of 425 kernels
  under one annotation) is one step, not twelve "steps" of two layers.
* Kernels launched by a graph launch call (cudaGraphLaunch, cuGraphLaunch, hipGraphLaunch and
  their suffixed variants) count as graph-replayed in every source, not only where nsys records
  a graph node id.
* MFU (HFU) above 100 % of the peak is unknown, with the reason, never a number.
* Graph capture and instantiation are one-time work: a capture note, and no host-bound,
  launch-bound, low-utilisation or CUDA-graph advice from them.

Oracles: the raw trace JSON read here with gzip/json (kernels joined to their launch call on
args.correlation, the annotation's launches, the capture's calls), TraceLens's stored
gpu_timeline.csv for the replay (total_time), AMD's MI300X data sheet for the peak, and
hand-built timelines whose steps are known by construction.
"""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import TRACES, copy_workspace, shared_ingest

from nsight_analyze import analysis
from nsight_analyze.cli import main
from nsight_analyze.diagnose import diagnose
from nsight_analyze.ingest.run import ingest
from nsight_analyze.mfu import hfu_mfu_summary
from nsight_analyze.store.workspace import open_workspace

VLLM = TRACES / "kineto" / "tracelens" / "inference" / "vllm_decode_full"
REPLAY = VLLM / "graph_execution.json.gz"
CAPTURE = VLLM / "capture_traces" / "graph_capture_rank_0.1773709742341309550.pt.trace.json.gz"
TRACE_DIFF_TEST = TRACES / "kineto" / "hta" / "trace_diff" / "test" / "test.json.gz"
NEGATIVE_QUEUE = TRACES / "kineto" / "hta" / "negative_queue_length_values_check" / "rank0.json.gz"
TIMELINE = TRACES / "oracles" / "tracelens" / "tracelens__inference__vllm_decode_full" / "perf_csvs"
requires_vllm = pytest.mark.skipif(not REPLAY.exists(), reason=f"{REPLAY} (shared real traces) is absent")
requires_capture = pytest.mark.skipif(
    not CAPTURE.exists(), reason=f"{CAPTURE} (shared real traces) is absent"
)

# AMD Instinct MI300X data sheet: 1307.4 TFLOPS dense BF16 (the peak `--gpu mi300x` must use)
MI300X_BF16 = 1307.4e12
GRAPH_LAUNCH_NAMES = {"cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch"}


def _events(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return json.load(f)["traceEvents"]


def _raw_graph_share(path: Path) -> tuple[int, int, float, float]:
    """(kernels, kernels launched by a graph launch call, their summed durations in us, all
    kernels' summed durations in us), straight from the trace JSON: a kernel and its launch call
    share args.correlation."""
    ev = _events(path)
    graph_corr = {
        e["args"]["correlation"]
        for e in ev
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and e.get("name") in GRAPH_LAUNCH_NAMES
    }
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    graph = [k for k in kernels if k["args"].get("correlation") in graph_corr]
    return len(kernels), len(graph), sum(k["dur"] for k in graph), sum(k["dur"] for k in kernels)


@pytest.fixture(scope="module")
def replay_db(tmp_path_factory) -> Path:
    return copy_workspace(shared_ingest([REPLAY])[1], tmp_path_factory.mktemp("vllm_replay") / "ws.duckdb")


@pytest.fixture(scope="module")
def capture_db(tmp_path_factory) -> Path:
    return copy_workspace(shared_ingest([CAPTURE])[1], tmp_path_factory.mktemp("vllm_capture") / "ws.duckdb")


# ------------------------------------------------------------------------------------------------
# the replay: one step


@requires_vllm
def test_one_graph_replay_under_one_annotation_is_one_step(replay_db: Path) -> None:
    ev = _events(REPLAY)
    (note,) = [e for e in ev if e.get("cat") == "user_annotation"]
    assert note["name"].startswith("execute_32_context_0")
    # the GPU work the annotation launched: ops whose launch call starts inside it (same thread)
    inside = {
        e["args"]["correlation"]
        for e in ev
        if e.get("cat") == "cuda_runtime"
        and e["tid"] == note["tid"]
        and note["ts"] <= e["ts"] < note["ts"] + note["dur"]
    }
    ops = [
        e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy") and e["args"].get("correlation") in inside
    ]
    span_us = max(o["ts"] + o["dur"] for o in ops) - min(o["ts"] for o in ops)
    with open(TIMELINE / "gpu_timeline.csv") as f:
        total_ms = {r["type"]: float(r["time ms"]) for r in csv.DictReader(f)}["total_time"]
    con = open_workspace(replay_db, read_only=True)
    try:
        rows = con.execute("SELECT step, end_ns - start_ns FROM steps ORDER BY step").fetchall()
    finally:
        con.close()
    assert len(rows) == 1 and rows[0][0] == 0  # one step (it was 12 windows of two layers each)
    assert rows[0][1] == pytest.approx(span_us * 1e3, rel=1e-6)
    assert rows[0][1] == pytest.approx(total_ms * 1e6, rel=1e-4)  # TraceLens: 10.7432 ms


@requires_vllm
def test_graph_launched_kernels_count_as_graph_replays(replay_db: Path) -> None:
    n, graph, graph_us, all_us = _raw_graph_share(REPLAY)
    assert (n, graph) == (425, 421)
    con = open_workspace(replay_db, read_only=True)
    try:
        cov = con.execute(
            "SELECT sum(kernels), sum(graph_kernels), sum(graph_kernel_ns), sum(kernel_ns), "
            "max(graphs) FROM graph_coverage"
        ).fetchone()
        rank = con.execute(
            "SELECT kernels, graph_kernels, graph_kernel_ns, kernel_ns FROM diag_rank_kernels"
        ).fetchone()
    finally:
        con.close()
    assert cov[:2] == (n, graph) and rank[:2] == (n, graph)
    assert cov[2] / cov[3] == pytest.approx(graph_us / all_us, abs=1e-4)  # 97.3 %
    assert rank[2] / rank[3] == pytest.approx(graph_us / all_us, abs=1e-4)
    assert cov[4] is None  # Kineto records no graph id: the number of graphs is unknown, not 0


@requires_vllm
def test_cuda_graphs_note_counts_the_hip_graph_launch(replay_db: Path) -> None:
    con = open_workspace(replay_db, read_only=True)
    try:
        found = {f.id: f for f in diagnose(con).findings}
    finally:
        con.close()
    assert "cuda-graphs" in found
    assert found["cuda-graphs"].metrics["graph_launches"] == 1  # one hipGraphLaunch in the JSON
    assert found["cuda-graphs"].metrics["graph_time_pct"] == pytest.approx(97.3, abs=0.1)
    assert "cuda-graph-candidates" not in found and "launch-bound" not in found


@requires_vllm
def test_mfu_of_the_decode_step(replay_db: Path) -> None:
    step_s = 10_743_181e-9  # the step above: TraceLens's total_time
    con = open_workspace(replay_db, read_only=True)
    try:
        s = hfu_mfu_summary(con, model_flops_per_step=2.3e11, gpu="mi300x")
        # 1e12 per step over the true step: possible (7.1 %), not the 131.7 % of a two-layer window
        s12 = hfu_mfu_summary(con, model_flops_per_step=1e12, gpu="mi300x")
    finally:
        con.close()
    assert s["mfu"] == pytest.approx(2.3e11 / step_s / MI300X_BF16, rel=1e-3)  # 1.64 %
    assert [p["mfu"] for p in s["per_step"]] == pytest.approx([s["mfu"]])
    assert s12["mfu"] == pytest.approx(1e12 / step_s / MI300X_BF16, rel=1e-3)


@requires_vllm
def test_mfu_above_the_peak_is_unknown_never_a_number(replay_db: Path) -> None:
    # windows cut from inside the step (the first 0.5 ms, then the rest): 1e12 FLOP in 0.5 ms is
    # 153 % of an MI300X, which no GPU does: every MFU is unknown, and the note says why
    import pandas as pd

    con = open_workspace(replay_db, read_only=True)
    try:
        t0, t1 = con.execute("SELECT start_ns, end_ns FROM steps").fetchone()
        windows = pd.DataFrame(
            [(0, 0, t0, t0 + 500_000), (0, 1, t0 + 500_000, t1)],
            columns=["rank", "step", "start_ns", "end_ns"],
        )
        s = hfu_mfu_summary(con, model_flops_per_step=1e12, gpu="mi300x", window_df=windows)
    finally:
        con.close()
    assert 1e12 / 0.5e-3 / MI300X_BF16 > 1.0  # the premise
    assert s["mfu"] is None
    assert [p["mfu"] for p in s["per_step"]] == [None, None]
    assert [p["mfu"] for p in s["per_rank"]] == [None]
    assert any("above 100 % of the peak in step(s) 0" in n for n in s["notes"])
    # the CLI on the true step: 2e13 FLOP in 10.74 ms is above the peak too (at most 1.40e13 fit)
    assert 2e13 > 10_743_181e-9 * MI300X_BF16
    for fmt in ("json", "table"):
        out = CliRunner().invoke(
            main,
            [
                "mfu",
                "--db",
                str(replay_db),
                "--model-flops-per-step",
                "2e13",
                "--gpu",
                "mi300x",
                "--format",
                fmt,
            ],
        )
        assert out.exit_code == 0, out.output
        if fmt == "json":
            doc = json.loads(out.output[out.output.index("{") :])
            assert doc["mfu"] is None and doc["per_step"][0]["mfu"] is None
            assert any("MFU unknown: above 100 %" in n for n in doc["notes"])
        else:
            assert "unknown" in out.output and "MFU unknown: above 100 %" in " ".join(out.output.split())
            assert "%" not in "".join(
                ln.split()[4] for ln in out.output.splitlines() if ln.split()[:1] in (["0"], ["all"])
            )


# ------------------------------------------------------------------------------------------------
# the capture: one-time work


@requires_capture
def test_graph_capture_is_a_note_not_host_bound_advice(capture_db: Path) -> None:
    ev = _events(CAPTURE)
    api = sorted((e for e in ev if e.get("cat") == "cuda_runtime"), key=lambda e: e["ts"])
    (begin,) = [e for e in api if e["name"] == "hipStreamBeginCapture"]
    (end,) = [e for e in api if e["name"] == "hipStreamEndCapture"]
    ran = {e["args"].get("correlation") for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")}
    launches = [
        e
        for e in api
        if "Launch" in e["name"]
        and e["tid"] == begin["tid"]
        and begin["ts"] <= e["ts"] <= end["ts"] + end["dur"]
    ]
    assert len(launches) == 421 and not any(e["args"]["correlation"] in ran for e in launches)
    con = open_workspace(capture_db, read_only=True)
    try:
        found = {f.id: f for f in diagnose(con).findings}
    finally:
        con.close()
    note = found["graph-capture"]
    assert note.kind == "capture"
    assert note.metrics["captures"] == 1 and note.metrics["instantiations"] == 1
    assert note.metrics["captured_launches"] == len(launches)
    assert note.metrics["captured_launches_run"] == 0
    for steady in ("host-bound", "launch-bound", "cuda-graph-candidates", "gpu-low-utilisation"):
        assert steady not in found, steady
    advice = " ".join(fx.action for f in found.values() for fx in f.fixes)
    assert "CUDA graphs or torch.compile" not in advice


# ------------------------------------------------------------------------------------------------
# CUDA graph launches of a Kineto trace from CUDA


@pytest.mark.parametrize(
    ("trace", "graph_kernels", "graph_launches"),
    [
        # HTA's trace_diff "test" trace: 12 cudaGraphLaunch calls replay 4,464 kernels
        (TRACE_DIFF_TEST, 4464, 12),
        # HTA's negative_queue_length rank 0: 70 cudaGraphLaunch calls, 135 kernels
        (NEGATIVE_QUEUE, 135, 70),
    ],
    ids=["trace_diff_test", "negative_queue_length"],
)
def test_cuda_graph_launch_kernels_of_a_kineto_trace(
    tmp_path: Path, trace: Path, graph_kernels: int, graph_launches: int
) -> None:
    if not trace.exists():
        pytest.skip(f"{trace} (shared real traces) is absent")
    n, graph, graph_us, all_us = _raw_graph_share(trace)
    calls = sum(
        1 for e in _events(trace) if e.get("cat") == "cuda_runtime" and e.get("name") == "cudaGraphLaunch"
    )
    assert (graph, calls) == (graph_kernels, graph_launches)  # the raw JSON, as the comments say
    db = tmp_path / "ws.duckdb"
    ingest([trace], db)
    con = open_workspace(db, read_only=True)
    try:
        kernels, got, graph_ns, kernel_ns = con.execute(
            "SELECT kernels, graph_kernels, graph_kernel_ns, kernel_ns FROM diag_rank_kernels"
        ).fetchone()
        launches = con.execute("SELECT sum(calls) FROM api_summary WHERE is_graph_launch(name)").fetchone()[0]
        found = {f.id: f for f in diagnose(con).findings}
    finally:
        con.close()
    assert (kernels, got) == (n, graph)
    assert graph_ns / kernel_ns == pytest.approx(graph_us / all_us, rel=1e-6)
    assert launches == calls
    assert found["cuda-graphs"].metrics["graph_launches"] == calls
    assert found["cuda-graphs"].metrics["graph_time_pct"] == pytest.approx(100 * graph_us / all_us, rel=1e-6)


# ------------------------------------------------------------------------------------------------
# hand-built timelines


@pytest.mark.parametrize(
    ("name", "is_graph"),
    [
        ("cudaGraphLaunch", True),
        ("cudaGraphLaunch_v10000", True),
        ("cudaGraphLaunch_ptsz", True),
        ("cudaGraphLaunch_ptsz_v10000", True),
        ("cuGraphLaunch", True),
        ("cuGraphLaunch_ptsz", True),
        ("hipGraphLaunch", True),
        ("hipGraphLaunch_spt", True),
        ("cudaLaunchKernel", False),
        ("cudaGraphInstantiate", False),
        ("cudaGraphLaunchX", False),
        ("hipGraphLaunchNode", False),
    ],
)
def test_graph_launch_names(tmp_path: Path, name: str, is_graph: bool) -> None:
    con = open_workspace(tmp_path / "ws.duckdb")
    try:
        assert con.execute("SELECT is_graph_launch(?)", [name]).fetchone()[0] is is_graph
    finally:
        con.close()


LAYERS, A_NS, B_NS = 12, 100_000, 60_000


def _layers_workspace(tmp_path: Path, how: str):
    """One rank, 12 layers of kernels A then B back to back (period 160 us: both names repeat 12
    times at exactly that interval, so periodic detection finds 12 'steps'), launched `how`:
    'each' (one cudaLaunchKernel per kernel), 'graph' (one cudaGraphLaunch replaying all) or
    'annotated' (one launch each, all inside one NVTX range)."""
    con = open_workspace(tmp_path / "ws.duckdb")
    con.execute("INSERT INTO ranks (rank, file_id, device_id, gpu_name, world_size) VALUES (0, 1, 0, 'x', 1)")
    t0, kernels, api = 10_000_000, [], []
    for i in range(LAYERS):
        for j, (name, d) in enumerate((("layer_a_kernel", A_NS), ("layer_b_kernel", B_NS))):
            corr = 1 if how == "graph" else 2 + 2 * i + j
            start = t0 + i * (A_NS + B_NS) + (A_NS if j else 0)
            kernels.append((0, 0, 7, start, start + d, d, name, name, corr))
            if how != "graph":
                launch = 1_000_000 + (2 * i + j) * 5_000
                api.append((0, 1, launch, launch + 4_000, 4_000, "cudaLaunchKernel", corr, 0, "runtime"))
    if how == "graph":
        api.append((0, 1, 1_000_000, 1_009_000, 9_000, "cudaGraphLaunch", 1, 0, "runtime"))
    con.executemany(
        "INSERT INTO kernels (rank, device_id, stream_id, start_ns, end_ns, duration_ns, name, short_name,"
        " correlation_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        kernels,
    )
    con.executemany("INSERT INTO cuda_api VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", api)
    if how == "annotated":
        con.execute(
            "INSERT INTO nvtx VALUES (0, 1, 900000, 2000000, 'execute_model', NULL, 'push_pop', NULL)"
        )
    analysis.refresh(con, force=True)
    return con


def test_periodic_layers_of_separate_launches_stay_steps(tmp_path: Path) -> None:
    con = _layers_workspace(tmp_path, "each")
    try:
        rows = con.execute("SELECT step, end_ns - start_ns, source FROM steps ORDER BY step").fetchall()
    finally:
        con.close()
    # the control: nothing joins the layers, so the detector's 12 windows stand (its marker is B,
    # the name that comes last in the period: every window ends at a B's end)
    assert [r[2] for r in rows] == ["periodic"] * LAYERS
    assert [r[1] for r in rows] == [A_NS + B_NS] * LAYERS


@pytest.mark.parametrize("how", ["graph", "annotated"])
def test_a_graph_replay_or_an_annotation_is_never_split(tmp_path: Path, how: str) -> None:
    con = _layers_workspace(tmp_path, how)
    try:
        rows = con.execute("SELECT step, start_ns, end_ns, source FROM steps ORDER BY step").fetchall()
        graph = con.execute("SELECT graph_kernels FROM graph_coverage").fetchall()
    finally:
        con.close()
    # every boundary but the last lies inside the one launch's (annotation's) GPU work: one step
    # from the first kernel's start to the last one's end, labelled by what merged it
    source = "graph replay" if how == "graph" else "annotation"
    assert rows == [(0, 10_000_000, 10_000_000 + LAYERS * (A_NS + B_NS), source)]
    assert graph == [(2 * LAYERS if how == "graph" else 0,)]
