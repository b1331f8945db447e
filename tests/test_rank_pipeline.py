"""The rank-local step an ingest runs while it loads (rank_pipeline): used, equal, and safe.

Expected values come from the same workspace recomputed from scratch by
`analysis.refresh(force=True)` (the path that computes every rank itself), never from the
pipeline's own output.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from conftest import ROOT, copy_workspace, stored_tables

from nsight_analyze import analysis
from nsight_analyze.ingest import rank_pipeline
from nsight_analyze.ingest import run as ingest_module
from nsight_analyze.ingest.run import ingest
from nsight_analyze.store.workspace import open_workspace

SAMPLES = ROOT / "sample_traces"  # 4 rank files of 0.5 MB


@pytest.fixture(autouse=True)
def pipelined(monkeypatch):
    """The pipeline for inputs of any size (by default only from ingest.PIPELINE_MIN_BYTES)."""
    monkeypatch.setattr(ingest_module, "PIPELINE_MIN_BYTES", 0)


def _recomputed(db: Path, tmp_path: Path) -> dict[str, list]:
    """The stored tables of `db` recomputed from scratch in a copy."""
    con = open_workspace(copy_workspace(db, tmp_path / "recomputed.duckdb"))
    analysis.refresh(con, force=True)
    try:
        return stored_tables(con)
    finally:
        con.close()


def _staged_left(db: Path) -> list[str]:
    con = open_workspace(db, read_only=True)
    try:
        rows = con.execute("SELECT table_name FROM duckdb_tables() WHERE starts_with(table_name, '_staged')")
        return [r[0] for r in rows.fetchall()]
    finally:
        con.close()


@pytest.fixture
def spy(monkeypatch):
    """What the pipeline handed to refresh, and the rank batches computed outside it."""
    seen: dict[str, list] = {"early": [], "batches_after_load": []}
    finish, step = rank_pipeline.RankPipeline.finish, analysis.rank_local_step

    def finished(self):
        early = finish(self)
        seen["early"].append(early)
        return early

    def rank_step(con, staging=None, **what):
        if threading.current_thread().name != "rank-pipeline":
            seen["batches_after_load"].append(staging.ranks if staging else None)
        return step(con, staging, **what)

    monkeypatch.setattr(rank_pipeline.RankPipeline, "finish", finished)
    monkeypatch.setattr(analysis, "rank_local_step", rank_step)
    return seen


def test_the_ranks_computed_while_loading_are_taken_and_equal_a_recompute(tmp_path, spy):
    db = tmp_path / "w.duckdb"
    ingest([SAMPLES], db)
    (early,) = spy["early"]
    assert not early.failed and sorted(early.ranks) == [0, 1, 2, 3]
    assert spy["batches_after_load"] == []  # refresh computed no rank itself
    con = open_workspace(db, read_only=True)
    got = stored_tables(con)
    con.close()
    assert got == _recomputed(db, tmp_path)
    assert _staged_left(db) == []


def test_a_failing_rank_step_while_loading_leaves_refresh_to_compute_every_rank(tmp_path, spy, monkeypatch):
    step = analysis.rank_local_step

    def failing(con, staging=None, **what):
        if threading.current_thread().name == "rank-pipeline":
            raise RuntimeError("planted failure in the pipeline")
        return step(con, staging, **what)

    monkeypatch.setattr(analysis, "rank_local_step", failing)
    db = tmp_path / "w.duckdb"
    ingest([SAMPLES], db)
    (early,) = spy["early"]
    assert early.failed
    con = open_workspace(db, read_only=True)
    got = stored_tables(con)
    con.close()
    assert got == _recomputed(db, tmp_path)
    assert _staged_left(db) == []


def test_a_setting_changed_during_the_load_discards_what_was_computed_under_the_old_one(
    tmp_path, spy, monkeypatch
):
    """The stamp rule: results computed before the change answer for the old setting (the
    sample's steps are NVTX ranges the default step_pattern matches; the new one matches none)."""
    load_one, init = ingest_module.load_one, rank_pipeline.RankPipeline.__init__
    pipelines, loaded = [], []

    def started(self, *args, **kwargs):
        init(self, *args, **kwargs)
        pipelines.append(self)

    def load_then_change(con, cand):
        outcome = load_one(con, cand)
        loaded.append(outcome)
        if len(loaded) == 2:  # once a rank was computed under the old value
            deadline = time.monotonic() + 120
            while not pipelines[0].early.ranks and time.monotonic() < deadline:
                time.sleep(0.02)
            con.execute("UPDATE settings SET value = '^no_such_step$' WHERE key = 'step_pattern'")
        return outcome

    monkeypatch.setattr(rank_pipeline.RankPipeline, "__init__", started)
    monkeypatch.setattr(ingest_module, "load_one", load_then_change)
    db = tmp_path / "w.duckdb"
    ingest([SAMPLES], db)
    (early,) = spy["early"]
    assert early.ranks and not early.failed  # it computed ranks: refresh did not use them
    assert sorted(r for batch in spy["batches_after_load"] for r in batch) == [0, 1, 2, 3]
    con = open_workspace(db, read_only=True)
    got = stored_tables(con)
    assert con.execute("SELECT DISTINCT source FROM steps").fetchall() == [("detected",)]
    con.close()
    assert got == _recomputed(db, tmp_path)


def test_an_interrupted_load_stops_the_pipeline_and_the_next_command_computes(tmp_path, monkeypatch):
    load_one = ingest_module.load_one
    calls = []

    def interrupted(con, cand):
        calls.append(cand)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return load_one(con, cand)

    monkeypatch.setattr(ingest_module, "load_one", interrupted)
    db = tmp_path / "w.duckdb"
    with pytest.raises(KeyboardInterrupt):
        ingest([SAMPLES], db)
    assert not any(t.name == "rank-pipeline" for t in threading.enumerate())
    monkeypatch.undo()
    con = open_workspace(db)
    assert con.execute("SELECT count(*) FROM files").fetchone()[0] == 2  # the files that landed
    analysis.refresh(con)
    got = stored_tables(con)
    con.close()
    assert _staged_left(db) == []
    assert got == _recomputed(db, tmp_path)


def test_files_added_to_a_computed_workspace_append_their_early_results(tmp_path, spy):
    """An incremental ingest: the kept ranks' rows are copied, the new ranks' taken from the pipeline."""
    first, later = tmp_path / "first", tmp_path / "later"
    first.mkdir()
    later.mkdir()
    for i, trace in enumerate(sorted(SAMPLES.glob("*.sqlite"))):
        (first if i < 1 else later).joinpath(trace.name).symlink_to(trace)
    db = tmp_path / "w.duckdb"
    ingest([first], db)  # one file: no pipeline
    ingest([first, later], db)  # three new files, loaded beside their rank step
    assert [sorted(e.ranks) for e in spy["early"]] == [[1, 2, 3]]
    assert spy["batches_after_load"] == [[0]]  # the first ingest's own batch; the second's none
    con = open_workspace(db, read_only=True)
    got = stored_tables(con)
    con.close()
    assert got == _recomputed(db, tmp_path)
    assert _staged_left(db) == []


def test_a_small_input_loads_without_the_pipeline(tmp_path, spy, monkeypatch):
    """Below PIPELINE_MIN_BYTES the extra rank batch costs more than the load could hide."""
    monkeypatch.setattr(ingest_module, "PIPELINE_MIN_BYTES", 32 << 20)  # the default; samples: 1.1 MB
    ingest([SAMPLES], tmp_path / "w.duckdb")
    assert spy["early"] == []
    assert sorted(r for batch in spy["batches_after_load"] for r in batch) == [0, 1, 2, 3]
