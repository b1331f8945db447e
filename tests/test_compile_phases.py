"""torch.compile compilation is one-time work (issue 52, point 4).

PyTorch 2.x wraps each compile step in `dynamo_timed`, which records
`record_function(f"{key} (dynamo_timed)")`: a Kineto `user_annotation` (an NVTX range under nsys).
A trace that holds the first call of a compiled model therefore has seconds of such ranges with the
GPU idle; the tool must say so (the `compile-phase` note) and leave that time out of the
steady-state findings, as it does for graph capture (tests/test_graph_replay.py).

Oracles: a small PyTorch-profiler trace written here whose timeline is known by construction
(every expected number is worked out by hand in the comments, from the definitions of
docs/metrics.md "Idle causes" and "Windows"), the same trace without the compilation, and the same
trace with the compile range renamed (a control: the idle is then steady-state host work). The
runtime markers of compiled code in real traces (HTA's and TraceLens's, counted in the raw JSON
here) must not be compile phases.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import TRACES, ingested, shared_ingested

from nsight_analyze.diagnose import diagnose

US = 1000  # ns per µs
T0 = 1000  # µs: ProfilerStep#0 starts here
COMPILE_US = 2_000_000  # the outer compile range: 2 s
E = T0 + 5 + COMPILE_US  # µs: the compilation ends here, and step 0's model code starts
OUTER = "_compile.compile_inner (dynamo_timed)"
STEADY_STEPS = 3  # ProfilerStep#1..#3 after the compiling step 0


def _events(compile_name: str | None, emit_nvtx: bool = False) -> list[dict]:
    """One host thread (pid 1, tid 1), one stream (7).

    `compile_name` None: no compilation (every step is the steady pattern). Otherwise step 0 opens
    with a 2 s range of that name [T0+5, E) holding nested `dynamo_timed` ranges and two autotuning
    benchmark kernels, then runs the steady pattern from E.

    The steady pattern of a step starting at S (µs): three launches at S+10, S+300, S+600 (5 µs
    each), each kernel 10 µs after its launch and 200 µs long (S+20, S+310, S+610); the step's
    ProfilerStep# range is [S, S+1000), the next step starts at S+1000. A 'Torch-Compiled Region'
    annotation and a 'CompiledFunction' op wrap the launches, as compiled code records at run time.
    `emit_nvtx`: the compile ranges' text as torch.autograd.profiler.emit_nvtx writes it (nsys
    --pytorch=autograd-nvtx): the name, then ', op_id = N'.
    """
    ev: list[dict] = []
    corr = iter(range(100, 10_000))

    def x(cat: str, name: str, ts: int, dur: int, **args) -> None:
        if emit_nvtx and cat == "user_annotation" and name.endswith(")"):
            name = f"{name}, op_id = {len(ev) + 1}"
        pid, tid = (0, 7) if cat == "kernel" else (1, 1)
        ev.append(
            {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}
        )

    def launch(ts: int, kernel: str, dur: int) -> None:
        c = next(corr)
        x("cuda_runtime", "cudaLaunchKernel", ts, 5, correlation=c)
        x(
            "kernel",
            kernel,
            ts + 10,
            dur,
            device=0,
            stream=7,
            correlation=c,
            grid=[64, 1, 1],
            block=[128, 1, 1],
        )

    def steady(s: int) -> None:
        x("user_annotation", "Torch-Compiled Region: 0/0", s + 5, 700)
        x("cpu_op", "CompiledFunction", s + 6, 690)
        for off, name in (
            (10, "triton_poi_fused_add_0"),
            (300, "sm90_xmma_gemm_bf16"),
            (600, "triton_red_fused_sum_1"),
        ):
            launch(s + off, name, 200)

    start0 = E if compile_name else T0
    x("cpu_op", "ProfilerStep#0", T0, start0 + 1000 - T0)
    if compile_name:
        x("user_annotation", compile_name, T0 + 5, COMPILE_US)
        if compile_name == OUTER:  # the nested ranges dynamo_timed records inside it
            x("user_annotation", "OutputGraph.call_user_compiler (dynamo_timed)", T0 + 100_000, 1_800_000)
            x("user_annotation", "compile_fx_inner (dynamo_timed)", T0 + 200_000, 1_600_000)
            x(
                "user_annotation",
                "CachingAutotuner.benchmark_all_configs (dynamo_timed)",
                T0 + 1_000_000,
                100_000,
            )
        # two autotuning benchmarks: launches at T0+1_000_010 and T0+1_050_010, kernels 50 µs
        launch(T0 + 1_000_010, "triton_poi_fused_add_0", 50)
        launch(T0 + 1_050_010, "triton_poi_fused_add_0", 50)
    steady(start0)
    for k in range(1, STEADY_STEPS + 1):
        s = start0 + 1000 * k
        x("cpu_op", f"ProfilerStep#{k}", s, 1000)
        steady(s)
    return ev


def _diagnosed(tmp_path: Path, compile_name: str | None, name: str, emit_nvtx: bool = False):
    path = tmp_path / f"{name}.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": _events(compile_name, emit_nvtx)}))
    con = ingested([path], tmp_path / f"{name}.duckdb")
    try:
        phases = con.execute(
            "SELECT kind, name, start_ns, end_ns, api_calls, launches, launches_run FROM capture_phases"
        ).fetchall()
        idle = con.execute("SELECT step, idle_ns, compile_idle_ns FROM capture_idle ORDER BY step").fetchall()
        found = {f.id: f for f in diagnose(con).findings}
    finally:
        con.close()
    return phases, idle, found


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple]:
    tmp = tmp_path_factory.mktemp("compile_phases")
    return {
        "compiled": _diagnosed(tmp, OUTER, "compiled"),
        "steady": _diagnosed(tmp, None, "steady"),
        "emit_nvtx": _diagnosed(tmp, OUTER, "emit_nvtx", emit_nvtx=True),
        # the control: the same 2 s range under a name that is not a compile step
        "renamed": _diagnosed(tmp, "prepare_model", "renamed"),
    }


# Hand counts (docs/metrics.md "Windows": the first step's window starts at its first GPU op, step
# N's at step N-1's last op end; "Idle causes": before an op, idle until its launch call starts is
# host_bound, from there to the op launch_gap).
# A steady step k >= 1, window [S_{k-1}+810, S_k+810): host_bound 200 (S_{k-1}+810 .. S_k+10)
#   + 80 + 90, launch_gap 10 + 10 + 10 (µs).
# Step 0 without compilation, window [S+20, S+810): host_bound 80 + 90, launch_gap 10 + 10.
# Step 0 with it, window [T0+1_000_020 (first benchmark kernel), E+810): outside the compile range
#   host_bound [E, E+10) + 80 + 90 and launch_gap [E+10, E+20) + 10 + 10.
STEADY_HB = 3 * (200 + 80 + 90) * US
STEADY_LG = 3 * 30 * US
HB_STEADY_RUN = STEADY_HB + (80 + 90) * US  # 1,280 µs
LG_STEADY_RUN = STEADY_LG + 20 * US  # 110 µs
HB_COMPILED_RUN = STEADY_HB + (10 + 80 + 90) * US  # 1,290 µs
LG_COMPILED_RUN = STEADY_LG + 30 * US  # 120 µs
# The GPU idle inside the compile range within step 0's window [T0+1_000_020, E): that span less
# the two 50 µs benchmark kernels, all of it host_bound / launch_gap.
COMPILE_IDLE = (E - (T0 + 1_000_020) - 2 * 50) * US  # 999,885 µs


@pytest.mark.parametrize("run", ["compiled", "emit_nvtx"])
def test_compile_phase_is_found_and_noted(runs, run: str) -> None:
    phases, idle, found = runs[run]
    name = OUTER if run == "compiled" else f"{OUTER}, op_id = 2"  # the second event written
    # one phase: the nested ranges merge into the outer one, 2 s from T0+5; its two calls are the
    # benchmark launches, and both ran
    assert phases == [("torch_compile", name, (T0 + 5) * US, E * US, 2, 2, 2)]
    note = found["compile-phase"]
    assert note.kind == "capture" and note.recoverable_ns_per_step is None
    assert note.metrics["compile_ns"] == COMPILE_US * US and note.metrics["compile_phases"] == 1
    assert note.metrics["compile_launches_run"] == 2
    assert note.metrics["compile_steps"] == [0] and note.steps == [0]
    assert note.metrics["compile_idle_ns"] == COMPILE_IDLE
    # only step 0 holds it; the whole-capture window (step NULL) holds the same idle
    assert idle == [(0, COMPILE_IDLE, COMPILE_IDLE), (None, COMPILE_IDLE, COMPILE_IDLE)]
    assert "torch.compile compilation: 2000.000 ms of host time, one-time" in note.summary
    assert "graph-capture" not in found  # no stream capture in this trace


def test_compile_time_is_not_host_bound_and_steady_state_is_unchanged(runs) -> None:
    _, _, compiled = runs["compiled"]
    _, _, steady = runs["steady"]
    # without compilation: the hand-counted steady idle, every step over the threshold
    assert steady["host-bound"].metrics["host_bound_ns_total"] == HB_STEADY_RUN
    assert steady["host-bound"].metrics["launch_gap_ns_total"] == LG_STEADY_RUN
    # with it: the same steady idle plus step 0's 10 µs of each cause after the compile range,
    # none of the 1 s inside it; step 0 (2 s long) is no longer over the threshold
    hb = compiled["host-bound"]
    assert hb.metrics["host_bound_ns_total"] == HB_COMPILED_RUN
    assert hb.metrics["launch_gap_ns_total"] == LG_COMPILED_RUN
    assert hb.steps == [1, 2, 3]
    for steady_only in ("gpu-starvation", "gpu-low-utilisation", "launch-bound"):
        assert steady_only not in compiled, steady_only
    assert "compile-phase" not in steady


def test_the_same_idle_under_another_name_is_steady_state(runs) -> None:
    # the control: a 2 s range that is not a compile step is host work of the steady state
    phases, idle, found = runs["renamed"]
    assert phases == [] and idle == [] and "compile-phase" not in found
    assert found["host-bound"].metrics["host_bound_ns_total"] > COMPILE_IDLE
    assert "gpu-starvation" in found  # the 950 ms gap before step 0's model code


def test_event_order_does_not_change_the_phases(runs, tmp_path: Path) -> None:
    # Kineto events need not be sorted (docs/architecture.md): the same trace written backwards
    # gives the same phases, idle and note
    phases, idle, found = runs["compiled"]
    path = tmp_path / "backwards.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": _events(OUTER)[::-1]}))
    con = ingested([path], tmp_path / "ws.duckdb")
    try:
        got = con.execute(
            "SELECT kind, name, start_ns, end_ns, api_calls, launches, launches_run FROM capture_phases"
        ).fetchall()
        got_idle = con.execute(
            "SELECT step, idle_ns, compile_idle_ns FROM capture_idle ORDER BY step"
        ).fetchall()
        note = {f.id: f for f in diagnose(con).findings}["compile-phase"]
    finally:
        con.close()
    assert (got, got_idle) == (phases, idle)
    assert note.summary == found["compile-phase"].summary


def test_compilation_in_a_later_step_is_named_recompilation(tmp_path: Path) -> None:
    # the compiled trace, plus a 50 µs recompile in step 2 (S = E + 2000) while its third kernel
    # runs [S+610, S+810): the GPU is busy throughout, so the steady idle is the hand count above
    events = _events(OUTER)
    s2 = E + 2000
    events.append({"ph": "X", "cat": "user_annotation", "name": OUTER, "pid": 1, "tid": 1, "ts": s2 + 700,
                   "dur": 50, "args": {}})  # fmt: skip
    path = tmp_path / "recompiled.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    con = ingested([path], tmp_path / "ws.duckdb")
    try:
        found = {f.id: f for f in diagnose(con).findings}
    finally:
        con.close()
    note = found["compile-phase"]
    assert note.metrics["compile_steps"] == [0, 2] and note.metrics["compile_phases"] == 2
    assert note.metrics["compile_ns"] == (COMPILE_US + 50) * US
    assert note.title.startswith("torch.compile recompiled in 2 steps")
    assert "one-time" not in note.summary.split("(")[0] and "recompilation" in note.summary
    assert any("TORCH_LOGS=recompiles" in fx.action for fx in note.fixes)
    assert found["host-bound"].metrics["host_bound_ns_total"] == HB_COMPILED_RUN


# ------------------------------------------------------------------------------------------------
# real traces: the markers compiled code records at run time are not compilation

RUNTIME_MARKERS = {
    # trace -> {a marker name it holds: how many times, counted in the raw JSON}
    "negative_queue_length": (
        TRACES / "kineto" / "hta" / "negative_queue_length_values_check" / "rank0.json.gz",
        {"CompiledFunction": 35, "CompiledFunctionBackward": 35},
    ),
    "trace_diff_test": (
        TRACES / "kineto" / "hta" / "trace_diff" / "test" / "test.json.gz",
        {"CompiledFunction": 6, "CompiledFunctionBackward": 6},
    ),
    "b200": (
        TRACES / "kineto" / "tracelens" / "b200" / "eager_trace.json.gz",
        {"Torch-Compiled Region: 0/1": 1, "TorchDynamo Cache Lookup": 1},
    ),
}


@pytest.mark.parametrize("case", sorted(RUNTIME_MARKERS))
def test_runtime_markers_are_not_compile_phases(tmp_path: Path, case: str) -> None:
    trace, markers = RUNTIME_MARKERS[case]
    if not trace.exists():
        pytest.skip(f"{trace} (shared real traces) is absent")
    with gzip.open(trace, "rt") as f:
        events = json.load(f)["traceEvents"]
    for marker, count in markers.items():  # the premise: the markers are there
        assert sum(1 for e in events if e.get("name") == marker) == count, marker
    assert not any(str(e.get("name", "")).endswith(" (dynamo_timed)") for e in events)
    con = shared_ingested([trace], tmp_path / "ws.duckdb")
    try:
        kinds = con.execute("SELECT DISTINCT kind FROM capture_phases ORDER BY kind").fetchall()
        found = {f.id for f in diagnose(con).findings}
    finally:
        con.close()
    assert ("torch_compile",) not in kinds
    assert "compile-phase" not in found
