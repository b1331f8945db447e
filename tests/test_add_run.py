"""One more run ingested into a workspace of runs (issue 55): only the new run's job-level results
are computed, and every stored result is what an ingest of all the runs at once stores.

Oracle: the ingest of every folder at once into an empty workspace (the job step of every job,
which the tests of the job-level results check against the generator's truth); for the shared
real traces, the job step of every job on the same workspace (refresh(force=True)). The runs are
nsight_analyze.synth jobs of 4 ranks on 2 nodes (so the clock alignment refines each host from the
collectives) with different seeds: their captures start at the same time with the same world
size, so each folder is a job of its own (merge_jobs, rule 4), numbered in the order of ingest.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from nsight_analyze import analysis
from nsight_analyze.ingest.run import ingest
from nsight_analyze.store import query_layer
from nsight_analyze.store.workspace import open_workspace
from nsight_analyze.synth import generate
from tests.conftest import TRACES, requires_shared

SEEDS = (1, 2, 3)  # three runs; different seeds, so different files (an ingest skips a file it holds)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("runs")
    for i, seed in enumerate(SEEDS):
        generate(
            root / f"run{i}", ranks=4, gpus_per_node=2, steps=4, kernels_per_step=40, seed=seed, truth=False
        )
    return [root / f"run{i}" for i in range(len(SEEDS))]


def _ingest(inputs: list[Path], db: Path, analyze: analysis.Wanted) -> tuple[list[str], list[str]]:
    """Ingest `inputs` into `db`: (what refresh said, the ingest's notes)."""
    said: list[str] = []
    real = analysis.refresh
    with pytest.MonkeyPatch.context() as mp:  # refresh's lines: the ingest passes no `say`
        mp.setattr(analysis, "refresh", lambda *a, **k: real(*a, **{**k, "say": said.append}))
        report = ingest(inputs, db, analyze=analyze)
    assert not report.failed
    return said, report.notes


def _tables(db: Path, stage: str | None = None) -> dict[str, list[tuple]]:
    """Every stored analysis result the workspace holds (of `stage`, else both), and `ranks`: all
    rows, all columns, sorted."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        held = analysis.computed(con)
        names = sorted(held if stage is None else held & set(query_layer.stored(stage))) + ["ranks"]
        return {n: sorted(con.execute(f'SELECT * FROM "{n}"').fetchall(), key=repr) for n in names}
    finally:
        con.close()


def _assert_same(db: Path, oracle: Path, stage: str | None = None) -> None:
    ours, theirs = _tables(db, stage), _tables(oracle, stage)
    assert sorted(ours) == sorted(theirs)
    differ = [name for name in theirs if ours[name] != theirs[name]]
    assert not differ, differ


@pytest.mark.parametrize("analyze", [None, "all"])  # the first answers; every result (held, then extended)
def test_added_run_computes_only_its_job(runs, tmp_path, analyze):
    oracle, db = tmp_path / "at_once.duckdb", tmp_path / "added.duckdb"
    _, at_once = _ingest(runs, oracle, analyze)
    _ingest(runs[:-1], db, analyze)
    said, notes = _ingest(runs[-1:], db, None)
    # the new folder is job 3 (ranks 8-11); jobs 1 and 2 are kept
    assert said[-1].startswith("analysis: job-level results of the new job(s) 3 only; the results of the 2 ")
    if analyze == "all":  # held, and of no rank or job: computed whole, over every rank
        assert "kernel_duration_totals computed whole" in said[-1]
    jobs_note = [n for n in notes if "jobs found" in n]  # the workspace's jobs, as at once
    assert jobs_note == [n for n in at_once if "jobs found" in n] and jobs_note[0].startswith("3 jobs found")
    _assert_same(db, oracle)


def test_rank_joining_a_job_computes_every_job(runs, tmp_path):
    """Ranks 1-3 of a run added to a workspace holding its rank 0: the job changes, so every job's
    results are computed again (and are again those of the ingest of all four at once)."""
    oracle, db = tmp_path / "at_once.duckdb", tmp_path / "added.duckdb"
    files = sorted(runs[0].glob("*.sqlite"))
    assert [f.name for f in files] == [f"report_rank{r}.sqlite" for r in range(4)]
    _ingest([runs[0]], oracle, "all")
    _ingest(files[:1], db, "all")
    said, _ = _ingest(files[1:], db, None)
    assert said[-1] == "analysis: the job-level results of every job computed again (new ranks join job 1)"
    _assert_same(db, oracle)


@requires_shared
def test_added_real_capture_that_started_before_others(tmp_path):
    """The shared nsys exports (README: 12 files, each a job of its own: test_jobs.py), pipit's
    saxpy export added last: its capture starts before some held ones, so their time groups change
    (merge_jobs) but not their jobs. Only its job is computed; every job-level result equals the
    job step of every job on the same workspace. (The rank-local results are the rank step's
    and are left out: recomputing the held ranks in other batches changes memop_summary's
    standard deviations in the last bit.)"""
    files = sorted((TRACES / "nsys").rglob("*.sqlite"))
    added = TRACES / "nsys" / "pipit" / "saxpy-mpi-cuda_nsys_perlmutter0.sqlite"
    assert len(files) == 12 and added in files
    db, oracle = tmp_path / "added.duckdb", tmp_path / "full.duckdb"
    _ingest([f for f in files if f != added], db, "all")
    said, _ = _ingest([added], db, None)
    assert said[-1].startswith(
        "analysis: job-level results of the new job(s) 12 only; the results of the 11 "
    )
    shutil.copyfile(db, oracle)
    con = open_workspace(oracle, analyse=False)
    try:
        analysis.refresh(con, force=True)
    finally:
        con.close()
    _assert_same(db, oracle, "job")
