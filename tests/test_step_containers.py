"""One annotation's GPU work is one step unit (issue 52: "steps must not split a single
annotation"): queries/steps/_tp_detected_steps.sql never puts a boundary inside it, unless the
annotation repeats (then each instance is a step) or child annotations delimit the steps.

Not done, on purpose: a single, unrepeated range around several periods (a "train" range around
the whole loop without child ranges) stays one step. The trace cannot tell it from one profiled
decode step of identical layers launched one call each, which must stay one step; a step pattern
(`--step-pattern`) or child ranges say which it is.

Oracle: hand-built workspaces whose steps are known by construction: repetitions of kernels A
(100 µs) then B (60 µs) back to back from T0, launched one call each (or all by one graph launch),
under the annotations given; the periodic detector's marker is B (the name whose first run comes
last in the period), so each detected step ends at a B's end.
"""

from __future__ import annotations

from pathlib import Path

from nsight_analyze import analysis
from nsight_analyze.store.workspace import open_workspace

A_NS, B_NS = 100_000, 60_000
PERIOD = A_NS + B_NS
T0 = 10_000_000
LAUNCH0, LAUNCH_EVERY = 1_000_000, 5_000  # host launch k at LAUNCH0 + k * LAUNCH_EVERY, 4 µs long


def _workspace(tmp_path: Path, reps: int, ranges: list[tuple[str, int, int]], graph: bool = False):
    """One rank, `reps` repetitions of A then B. `ranges`: NVTX ranges (text, first repetition,
    last repetition + 1) on the launching thread, each around the launches of those repetitions;
    `graph`: all kernels replayed by one cudaGraphLaunch at LAUNCH0."""
    con = open_workspace(tmp_path / "ws.duckdb")
    con.execute("INSERT INTO ranks (rank, file_id, device_id, gpu_name, world_size) VALUES (0, 1, 0, 'x', 1)")
    kernels, api = [], []
    for i in range(reps):
        for j, (name, d) in enumerate((("layer_a_kernel", A_NS), ("layer_b_kernel", B_NS))):
            k = 2 * i + j
            corr = 1 if graph else 2 + k
            start = T0 + i * PERIOD + (A_NS if j else 0)
            kernels.append((0, 0, 7, start, start + d, d, name, name, corr))
            if not graph:
                launch = LAUNCH0 + k * LAUNCH_EVERY
                api.append((0, 1, launch, launch + 4_000, 4_000, "cudaLaunchKernel", corr, 0, "runtime"))
    if graph:
        api.append((0, 1, LAUNCH0, LAUNCH0 + 9_000, 9_000, "cudaGraphLaunch", 1, 0, "runtime"))
    nvtx = []
    for text, first, stop in ranges:
        lo = LAUNCH0 + 2 * first * LAUNCH_EVERY - 500
        hi = (LAUNCH0 + 9_500) if graph else (LAUNCH0 + (2 * stop - 1) * LAUNCH_EVERY + 4_500)
        nvtx.append((0, 1, lo, hi, text, None, "push_pop", None))
    con.executemany(
        "INSERT INTO kernels (rank, device_id, stream_id, start_ns, end_ns, duration_ns, name, short_name,"
        " correlation_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        kernels,
    )
    con.executemany("INSERT INTO cuda_api VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", api)
    if nvtx:
        con.executemany("INSERT INTO nvtx VALUES (?, ?, ?, ?, ?, ?, ?, ?)", nvtx)
    analysis.refresh(con, force=True)
    return con


def _steps(con) -> list[tuple]:
    return con.execute("SELECT step, start_ns, end_ns, source FROM steps ORDER BY step").fetchall()


def _every(reps: int, source: str = "periodic") -> list[tuple]:
    return [(i, T0 + i * PERIOD, T0 + (i + 1) * PERIOD, source) for i in range(reps)]


def test_a_repeated_range_around_several_periods_is_one_step_each(tmp_path: Path) -> None:
    """ "execute_model" twice, around layers 0..5 and 6..11: the range repeats (it is the step),
    so each instance is one step of six layers; the detector's boundaries inside move to its end."""
    con = _workspace(tmp_path, 12, [("execute_model", 0, 6), ("execute_model", 6, 12)])
    try:
        assert _steps(con) == [
            (0, T0, T0 + 6 * PERIOD, "annotation"),
            (1, T0 + 6 * PERIOD, T0 + 12 * PERIOD, "annotation"),
        ]
    finally:
        con.close()


def test_a_graph_replay_inside_a_single_range_stays_one_step(tmp_path: Path) -> None:
    """vLLM's shape: one range around one graph launch replaying twelve layers. The periods inside
    one launch's work are not steps: the range is no container, and the replay is one step."""
    con = _workspace(tmp_path, 12, [("execute_32_context_0_generation_32", 0, 12)], graph=True)
    try:
        assert _steps(con) == [(0, T0, T0 + 12 * PERIOD, "graph replay")]
    finally:
        con.close()


def test_a_range_around_less_than_two_periods_stays_indivisible(tmp_path: Path) -> None:
    """A range around repetitions 3 and 4 only holds one boundary strictly inside (step 3's end):
    it moves to the range's end, merging steps 3 and 4 (one unit of work, not a loop)."""
    con = _workspace(tmp_path, 10, [("pair", 3, 5)])
    try:
        rows = _steps(con)
    finally:
        con.close()
    every = _every(10)
    assert rows == [*every[:3], (3, T0 + 3 * PERIOD, T0 + 5 * PERIOD, "annotation"),
                    *[(i - 1, s, e, src) for i, s, e, src in every[5:]]]  # fmt: skip
