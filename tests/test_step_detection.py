"""Steps without NVTX (issue 16.6): detected from the optimizer's bursts, else (settings
periodic_steps = 'on', `summary --periodic-steps`) from a kernel that runs once per step
(`steps.source = 'periodic'`), else the whole capture, and said which.

Oracles: the NVTX step windows of the same synthetic trace (the generator's annotations, checked
against its ground truth in test_partition) once the annotations and optimizer kernels are
hidden; on a real file, the marker kernel's start-to-start intervals read straight from the
SQLite export with sqlite3.
"""

from __future__ import annotations

import sqlite3
import statistics

import pytest
from click.testing import CliRunner
from conftest import TRACES

from nsight_analyze import analysis, synth
from nsight_analyze.cli import main
from nsight_analyze.ingest import ingest
from nsight_analyze.workspace import open_workspace

H100 = TRACES / "nsys" / "nsys-ai" / "h100_2gpu_1s.sqlite"
MOCK = TRACES / "nsys" / "nsys-ai" / "mock.sqlite"
requires_shared = pytest.mark.skipif(not H100.exists(), reason=f"{H100} (shared real traces) is absent")


def _windows(con) -> list[tuple]:
    return con.execute(
        "SELECT rank, step, start_ns, end_ns, source FROM steps ORDER BY rank, step"
    ).fetchall()


@pytest.fixture(scope="module")
def hidden(tmp_path_factory):
    """A 2-rank, 6-step synthetic job: its NVTX step windows, then the windows detected once the
    step pattern matches nothing and the optimizer kernels are renamed."""
    out = tmp_path_factory.mktemp("periodic")
    synth.generate(out, ranks=2, steps=6, kernels_per_step=60, seed=3, truth=False)
    db = out / "ws.duckdb"
    ingest([out], db)
    con = open_workspace(db)
    try:
        nvtx = _windows(con)
        con.execute("UPDATE settings SET value = '^no step matches this$' WHERE key = 'step_pattern'")
        con.execute("UPDATE settings SET value = 'on' WHERE key = 'periodic_steps'")
        renamed = con.execute(
            "UPDATE kernels SET name = regexp_replace(lower(name), 'adam|sgd|optim', 'upd', 'g'), "
            "short_name = regexp_replace(lower(short_name), 'adam|sgd|optim', 'upd', 'g') "
            "WHERE regexp_matches(lower(name), 'adam|sgd|optim')"
        ).fetchone()[0]
        analysis.refresh(con, force=True)
        return nvtx, _windows(con), renamed, db
    finally:
        con.close()


def test_periodic_steps_match_the_annotated_ones(hidden):
    nvtx, detected, renamed, _ = hidden
    assert renamed > 0  # the optimizer kernels existed and are hidden now
    assert {w[4] for w in nvtx} == {"nvtx"} and {w[4] for w in detected} == {"periodic"}
    for rank in (0, 1):
        want = [w[3] - w[2] for w in nvtx if w[0] == rank]
        got = [w[3] - w[2] for w in detected if w[0] == rank]
        assert len(got) == len(want) == 6
        # the first window starts at the rank's first operation in both; the others are one
        # period each, delimited by another kernel of the step than the NVTX range's end
        for g, w in zip(got[1:], want[1:]):
            assert g == pytest.approx(w, rel=0.02)


def test_summary_says_the_steps_are_periodic(hidden):
    db = hidden[3]
    result = CliRunner().invoke(main, ["summary", "--by", "step", "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "steps from: periodic" in result.output


@requires_shared
def test_real_h100_capture_steps_are_its_marker_kernel_period(tmp_path):
    db = tmp_path / "ws.duckdb"
    ingest([H100], db)
    assert CliRunner().invoke(main, ["summary", "--db", str(db), "--format", "json"]).exit_code == 0
    off = open_workspace(db, read_only=True)
    try:  # off by default: the capture is one window
        assert {r[4] for r in _windows(off)} == {"capture"}
    finally:
        off.close()
    result = CliRunner().invoke(main, ["summary", "--periodic-steps", "--db", str(db)])
    assert result.exit_code == 0 and "periodic_steps set to on" in result.output, result.output
    con = open_workspace(db)
    try:
        rows = con.execute(
            "SELECT rank, source, end_ns - start_ns FROM steps WHERE rank = 0 ORDER BY step"
        ).fetchall()
        assert rows and {r[1] for r in rows} == {"periodic"}
        from nsight_analyze import query_layer

        wanted = {q.name: q for q in query_layer.layer()}["_tp_detected_steps"]
        for q in query_layer.closure([wanted]):
            if q.stage != "live":
                con.execute(q.create("view", temporary=True))
        marker, runs = con.execute(
            "SELECT any_value(marker), count(*) FROM _tp_detected_steps WHERE rank = 0"
        ).fetchone()
    finally:
        con.close()
    raw = sqlite3.connect(f"file:{H100}?mode=ro", uri=True)
    try:
        starts = [
            s
            for (s,) in raw.execute(
                "SELECT k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName "
                "WHERE s.value = ? AND k.deviceId = (SELECT min(deviceId) FROM CUPTI_ACTIVITY_KIND_KERNEL) "
                "ORDER BY k.start",
                [marker],
            )
        ]
    finally:
        raw.close()
    assert len(starts) == runs  # each run of the marker closes a step (step 0 opens at the first operation)
    intervals = [b - a for a, b in zip(starts, starts[1:])]
    median_step = statistics.median(r[2] for r in rows[1:])
    assert median_step == pytest.approx(statistics.median(intervals), rel=0.02)


@requires_shared
def test_a_capture_without_a_regular_pattern_stays_one_window(tmp_path):
    db = tmp_path / "ws.duckdb"
    ingest([MOCK], db)
    con = open_workspace(db, analyse=False)
    con.execute("UPDATE settings SET value = 'on' WHERE key = 'periodic_steps'")
    con.close()
    con = open_workspace(db)
    try:
        assert {r[4] for r in _windows(con)} == {"capture"}
    finally:
        con.close()
