"""Where a detected step came from, and annotations that wrap a loop (issue 52).

* A detected step whose end moved to the end of a graph replay or an annotation (the detected
  steps inside it merged: queries/steps/_tp_detected_steps.sql "Indivisible work") says so:
  `steps.source` 'graph replay' / 'annotation', and `summary`'s "steps from:" line names it.
* One annotation around a whole loop ("train" around ten steps) does not merge the steps when
  annotations nested in it delimit the repetitions (a "backward" range per step), nor ever on a
  rank whose steps end at optimizer bursts.

Oracle: hand-built workspaces whose steps are known by construction (ten repetitions of kernels A
then B, each launched by its own call or all by one graph launch, under the annotations given),
as tests/test_graph_replay.py builds its layers.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from nsight_analyze import analysis
from nsight_analyze.cli import main
from nsight_analyze.store.workspace import open_workspace

STEPS, A_NS, B_NS, OPT_NS = 10, 100_000, 60_000, 20_000
T0 = 10_000_000  # the first kernel's start
LAUNCH0, LAUNCH_EVERY = 1_000_000, 5_000  # host launch k at LAUNCH0 + k * LAUNCH_EVERY, 4 us long


def _workspace(tmp_path: Path, how: str = "each", optimizer: bool = False, children: bool = False,
               loop: bool = True):  # fmt: skip
    """One rank: STEPS repetitions of A then B (then an Adam kernel when `optimizer`) back to back
    on the GPU, launched one call each (`how` 'each') or all by one cudaGraphLaunch ('graph');
    `loop`: one NVTX range "train" around every launch; `children`: each step's launches inside
    "forward" (A) and "backward" (B, and the optimizer) ranges nested in it."""
    con = open_workspace(tmp_path / "ws.duckdb")
    con.execute("INSERT INTO ranks (rank, file_id, device_id, gpu_name, world_size) VALUES (0, 1, 0, 'x', 1)")
    per_step = [("layer_a_kernel", A_NS), ("layer_b_kernel", B_NS)] + (
        [("adam_update_kernel", OPT_NS)] if optimizer else []
    )
    period = sum(d for _, d in per_step)
    kernels, api, nvtx = [], [], []
    k = 0
    for i in range(STEPS):
        start = T0 + i * period
        for j, (name, d) in enumerate(per_step):
            corr = 1 if how == "graph" else 2 + k
            kernels.append((0, 0, 7, start, start + d, d, name, name, corr))
            launch = LAUNCH0 + k * LAUNCH_EVERY
            if how != "graph":
                api.append((0, 1, launch, launch + 4_000, 4_000, "cudaLaunchKernel", corr, 0, "runtime"))
            if children:
                text = "forward" if j == 0 else "backward"
                nvtx.append((0, 1, launch - 500, launch + 4_500, text, None, "push_pop", None))
            start += d
            k += 1
    if how == "graph":
        api.append((0, 1, LAUNCH0, LAUNCH0 + 9_000, 9_000, "cudaGraphLaunch", 1, 0, "runtime"))
    if loop:
        nvtx.append(
            (0, 1, LAUNCH0 - 100_000, LAUNCH0 + k * LAUNCH_EVERY + 100_000, "train", None, "push_pop", None)
        )
    con.executemany(
        "INSERT INTO kernels (rank, device_id, stream_id, start_ns, end_ns, duration_ns, name, short_name,"
        " correlation_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        kernels,
    )
    con.executemany("INSERT INTO cuda_api VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", api)
    if nvtx:
        con.executemany("INSERT INTO nvtx VALUES (?, ?, ?, ?, ?, ?, ?, ?)", nvtx)
    analysis.refresh(con, force=True)
    return con, period


def _steps(con) -> list[tuple]:
    return con.execute("SELECT step, start_ns, end_ns, source FROM steps ORDER BY step").fetchall()


def _each_step(period: int, source: str) -> list[tuple]:
    """The construction's steps: step i from its first kernel's start to its last kernel's end
    (step 0 starts at the first kernel)."""
    return [(i, T0 + i * period, T0 + (i + 1) * period, source) for i in range(STEPS)]


def _steps_from(db: Path) -> str:
    res = CliRunner().invoke(main, ["summary", "--db", str(db)])
    assert res.exit_code == 0, res.output
    line = next(x for x in res.output.splitlines() if "steps from:" in x)
    return line[line.index("steps from:") + len("steps from:") : line.rindex(")")].strip()


@pytest.mark.parametrize("how, source", [("graph", "graph replay"), ("each", "annotation")])
def test_a_merged_step_says_what_merged_it(tmp_path: Path, how: str, source: str) -> None:
    """One graph launch (no annotation), or one annotation with no repeating children around
    separate launches: one step over the whole work, labelled by what made it one."""
    con, period = _workspace(tmp_path, how=how, loop=how == "each")
    try:
        assert _steps(con) == [(0, T0, T0 + STEPS * period, source)]
    finally:
        con.close()
    assert _steps_from(tmp_path / "ws.duckdb") == source


def test_merged_steps_follow_the_periodic_setting(tmp_path: Path) -> None:
    """A step merged from periodic boundaries is a periodic step: off with periodic_steps."""
    con, period = _workspace(tmp_path, how="graph", loop=False)
    try:
        con.execute("UPDATE settings SET value = 'off' WHERE key = 'periodic_steps'")
        analysis.refresh(con, force=True)
        assert _steps(con) == [(None, T0, T0 + STEPS * period, "capture")]
    finally:
        con.close()


def test_a_loop_annotation_with_repeating_children_keeps_the_steps(tmp_path: Path) -> None:
    """ "train" around ten steps, each step's B inside its own "backward" range: the children
    delimit the repetitions, so "train" is a loop and the ten periodic steps stand."""
    con, period = _workspace(tmp_path, children=True)
    try:
        assert _steps(con) == _each_step(period, "periodic")
    finally:
        con.close()
    assert _steps_from(tmp_path / "ws.duckdb") == "periodic"


def test_a_loop_annotation_never_merges_optimizer_steps(tmp_path: Path) -> None:
    """An optimizer burst ends a training step: "train" around ten of them (no children) is a
    loop, and the ten detected steps stand."""
    con, period = _workspace(tmp_path, optimizer=True)
    try:
        assert _steps(con) == _each_step(period, "detected")
    finally:
        con.close()


def test_the_control_without_annotations_keeps_the_steps(tmp_path: Path) -> None:
    """Separate launches, no annotation: nothing merges (the construction's ten steps)."""
    con, period = _workspace(tmp_path, loop=False)
    try:
        assert _steps(con) == _each_step(period, "periodic")
    finally:
        con.close()
