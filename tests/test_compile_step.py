"""A step that holds one-time work is not a steady-state step (issue 52: "the compile step is
counted in the mean step").

A torch.compile compilation or a CUDA/HIP graph capture (capture_phases) is start-up work paid
once: the step that holds it stays listed, flagged `steps.one_time`, and summary's mean and median
step (`step_stats`) leave it out, with a note saying so.

Oracle: the PyTorch-profiler trace of tests/test_compile_phases.py, whose timeline is known by
construction: ProfilerStep#0 opens with a 2 s compile range, then three steady steps of 1000 µs.
Windows (docs/metrics.md "Windows"): step 0 [T0+1_000_020, E+810) µs (from the first autotuning
kernel to its last kernel's end), step k >= 1 [E+1000(k-1)+810, E+1000k+810): 1000 µs each. Without
the compilation step 0 is [T0+20, T0+810): 790 µs. A hand-built nsys-like workspace with a stream
capture in its second step checks the graph-capture kind.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from conftest import ingested
from test_compile_phases import OUTER, STEADY_STEPS, T0, US, E, _events

from nsight_analyze import analysis
from nsight_analyze.cli import main
from nsight_analyze.store.workspace import open_workspace
from nsight_analyze.summary import summary

STEP0_COMPILED = (E + 810 - (T0 + 1_000_020)) * US  # 1,000,795 µs
STEADY = 1000 * US
STEP0_STEADY = 790 * US


def _trace(tmp_path: Path, compile_name: str | None, name: str) -> Path:
    path = tmp_path / f"{name}.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": _events(compile_name)}))
    return path


def test_the_compile_step_is_listed_flagged_and_left_out_of_the_mean(tmp_path: Path) -> None:
    con = ingested([_trace(tmp_path, OUTER, "compiled")], tmp_path / "c.duckdb")
    try:
        steps = con.execute("SELECT step, end_ns - start_ns, one_time FROM steps ORDER BY step").fetchall()
        out = summary(con, by="step")
    finally:
        con.close()
    assert steps == [(0, STEP0_COMPILED, True)] + [(k, STEADY, False) for k in range(1, STEADY_STEPS + 1)]
    # the per-step rows keep step 0, flagged
    assert [(r["step"], r["job_step_ns"], r["one_time"]) for r in out["partition"]] == [
        (s, ns, once) for s, ns, once in steps
    ]
    stats = out["step_stats"]
    assert stats == {
        "steps": 4,
        "steady_steps": 3,
        "one_time_steps": [0],
        "mean_step_ns": STEADY,
        "median_step_ns": STEADY,
        "min_step_ns": STEADY,
        "max_step_ns": STEADY,
    }
    # with the compile step the mean would be (1,000,795 + 3 x 1000) µs / 4 = 250.95 ms
    assert any("step 0 holds one-time work" in n and "left out of the mean" in n for n in out["notes"])


def test_without_compilation_every_step_counts(tmp_path: Path) -> None:
    con = ingested([_trace(tmp_path, None, "steady")], tmp_path / "s.duckdb")
    try:
        flags = con.execute("SELECT bool_or(one_time) FROM steps").fetchone()[0]
        out = summary(con, by="step")
    finally:
        con.close()
    assert flags is False
    stats = out["step_stats"]
    assert stats["one_time_steps"] == [] and stats["steady_steps"] == 4
    assert stats["mean_step_ns"] == (STEP0_STEADY + 3 * STEADY) / 4  # 947.5 µs
    assert stats["median_step_ns"] == STEADY
    assert not any("one-time" in n for n in out["notes"])


def test_a_renamed_range_is_not_one_time(tmp_path: Path) -> None:
    """The control: the same 2 s range under a name that is no compile step is steady-state work."""
    con = ingested([_trace(tmp_path, "prepare_model", "renamed")], tmp_path / "r.duckdb")
    try:
        out = summary(con, by="step")
    finally:
        con.close()
    assert out["step_stats"]["one_time_steps"] == [] and out["step_stats"]["steady_steps"] == 4


def test_summary_json_and_terminal_say_so(tmp_path: Path) -> None:
    db = tmp_path / "c.duckdb"
    ingested([_trace(tmp_path, OUTER, "compiled")], db).close()
    res = CliRunner().invoke(main, ["summary", "--db", str(db), "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["step_stats"]["one_time_steps"] == [0] and doc["step_stats"]["mean_step_ns"] == STEADY
    res = CliRunner().invoke(main, ["summary", "--db", str(db), "--by", "step"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "job step time (slowest rank): mean 1.000 ms, median 1.000 ms over 3 steady steps of 4" in text
    assert "step 0 holds one-time work" in text


PERIOD, K_NS = 200_000, 150_000  # one kernel per step, 150 µs long, every 200 µs


def _captured_workspace(tmp_path: Path):
    """One rank, five NVTX steps "step_i", one 150 µs kernel each, every 200 µs from t0; step i's
    host range [t0 + i P - 60 µs, + P), its launch 50 µs before its kernel. Windows (docs/metrics.md
    "Windows"): step 0 [t0, t0+150 µs), step i [t0 + (i-1) P + 150 µs, t0 + i P + 150 µs). Step 1's
    host range also holds cudaStreamBeginCapture / EndCapture / GraphInstantiate at t0 + 160..167 µs:
    inside step 1's window only (a graph captured in the second step)."""
    con = open_workspace(tmp_path / "g.duckdb")
    con.execute("INSERT INTO ranks (rank, file_id, device_id, gpu_name, world_size) VALUES (0, 1, 0, 'x', 1)")
    t0, kernels, api, nvtx = 10_000_000, [], [], []
    for i in range(5):
        s = t0 + i * PERIOD
        launch = s - 50_000
        kernels.append((0, 0, 7, s, s + K_NS, K_NS, "step_kernel", "step_kernel", 10 + i))
        api.append((0, 1, launch, launch + 4_000, 4_000, "cudaLaunchKernel", 10 + i, 0, "runtime"))
        nvtx.append((0, 1, s - 60_000, s - 60_000 + PERIOD, f"step_{i}", None, "push_pop", None))
    s1 = t0 + PERIOD - 60_000  # step 1's host range start
    api += [
        (0, 1, s1 + 20_000, s1 + 21_000, 1_000, "cudaStreamBeginCapture", 100, 0, "runtime"),
        (0, 1, s1 + 22_000, s1 + 23_000, 1_000, "cudaStreamEndCapture", 101, 0, "runtime"),
        (0, 1, s1 + 24_000, s1 + 27_000, 3_000, "cudaGraphInstantiate", 102, 0, "runtime"),
    ]
    con.executemany(
        "INSERT INTO kernels (rank, device_id, stream_id, start_ns, end_ns, duration_ns, name, short_name,"
        " correlation_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        kernels,
    )
    con.executemany("INSERT INTO cuda_api VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", api)
    con.executemany("INSERT INTO nvtx VALUES (?, ?, ?, ?, ?, ?, ?, ?)", nvtx)
    con.execute("UPDATE settings SET value = '^step_' WHERE key = 'step_pattern'")
    analysis.refresh(con, force=True)
    return con


def test_a_graph_capture_step_is_one_time(tmp_path: Path) -> None:
    con = _captured_workspace(tmp_path)
    try:
        kinds = con.execute("SELECT DISTINCT kind FROM capture_phases ORDER BY kind").fetchall()
        steps = con.execute("SELECT step, source, one_time FROM steps ORDER BY step").fetchall()
        stats = summary(con, by="step")["step_stats"]
    finally:
        con.close()
    assert kinds == [("graph_capture",), ("graph_instantiate",)]
    # the capture's host calls lie in step 1's window [t0+150 µs, t0+350 µs) only
    assert [(s, once) for s, _, once in steps] == [(0, False), (1, True), (2, False), (3, False), (4, False)]
    assert stats["one_time_steps"] == [1] and stats["steady_steps"] == 4


def test_every_mean_step_leaves_the_compile_step_out(tmp_path: Path) -> None:
    """diagnose's mean step, the report's headline, `runs` and the MFU windows read the same
    steady steps as summary (oracle: the three 1000 µs steps of the trace above)."""
    from nsight_analyze.diagnose import READS, diagnose
    from nsight_analyze.mfu.rows import windows
    from nsight_analyze.render.report.headline_section import headline_numbers
    from nsight_analyze.report_doc import report_document as collect
    from nsight_analyze.runs import runs

    db = tmp_path / "c.duckdb"
    ingested([_trace(tmp_path, OUTER, "compiled")], db).close()
    con = open_workspace(db, needs=[*READS, "time_partition"])
    try:
        assert diagnose(con).job["mean_step_ns"] == STEADY
        inp = collect(con, None, None)
        nums = headline_numbers(inp.partition.value, inp.rank_step.value)
        assert (nums["steps"], nums["step_time_median_ns"], nums["step_time_max_ns"]) == (3, STEADY, STEADY)
        (row,) = runs(con).rows
        assert (row["steps"], row["step_median_ns"]) == (3, STEADY)
        frame, source = windows(con)
        assert sorted(frame["step"]) == [1, 2, 3] and "1 step(s) of one-time work left out" in source
    finally:
        con.close()
