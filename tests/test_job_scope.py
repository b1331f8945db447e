"""One job at a time: summary, diagnose, report, mfu and compare on a workspace of several jobs.

Real input: `ingest ../shared/traces/nsys/`, twelve unrelated captures (issue 16.4); the
expected values come from the `ranks`/`jobs` tables of that workspace (which ranks a job has,
tests/test_jobs.py checks the split), from sqlite3 on the raw capture, or from the same command
on the capture ingested alone.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from nsight_analyze.cli import main
from nsight_analyze.store.workspace import open_workspace
from tests.conftest import TRACES, requires_shared

NSYS = TRACES / "nsys"
BEFORE = NSYS / "nsys-ai" / "mfu_2gpu_before.sqlite"
AFTER = NSYS / "nsys-ai" / "mfu_2gpu_after.sqlite"

pytestmark = requires_shared


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    from conftest import copy_workspace, shared_ingest

    return copy_workspace(shared_ingest([NSYS])[1], tmp_path_factory.mktemp("job_scope") / "nsys.duckdb")


def _jobs(db: Path) -> tuple[dict[int, list[int]], dict[str, int]]:
    """{job: its ranks} and {file name: its job}, read unscoped from the workspace."""
    con = open_workspace(db, read_only=True)
    try:
        ranks: dict[int, list[int]] = {}
        for rank, job in con.sql("SELECT rank, job FROM ranks ORDER BY rank").fetchall():
            ranks.setdefault(int(job), []).append(int(rank))
        files = con.sql(
            "SELECT f.path, any_value(r.job) FROM files f JOIN ranks r USING (file_id) GROUP BY 1"
        )
        return ranks, {Path(p).name: int(j) for p, j in files.fetchall()}
    finally:
        con.close()


def _cli(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout  # JSON on stdout; a recompute note may go to stderr


def test_summary_shows_one_job_and_says_which(folder):
    ranks, _ = _jobs(folder)
    assert len(ranks) > 1
    # the default: the most ranks with GPU operations (tp_capture), then most ranks, lowest number
    con = open_workspace(folder, read_only=True)
    busy = dict(
        con.sql("SELECT r.job, count(*) FROM tp_capture JOIN ranks r USING (rank) GROUP BY 1").fetchall()
    )
    con.close()
    largest = min(ranks, key=lambda j: (-busy.get(j, 0), -len(ranks[j]), j))
    doc = json.loads(_cli("summary", "--db", str(folder), "--format", "json"))
    assert doc["job"]["job"] == largest and doc["job"]["n_jobs"] == len(ranks)
    assert sorted(r["rank"] for r in doc["partition"]) == ranks[largest]
    text = _cli("summary", "--db", str(folder))
    assert f"{len(ranks)} jobs in this workspace; showing job {largest}" in " ".join(text.split())


def test_summary_of_a_named_job_equals_its_capture_alone(folder, tmp_path):
    """Top kernels of job N = the kernels of its one file: sqlite3 on the raw capture."""
    _, job_of = _jobs(folder)
    job = job_of[BEFORE.name]
    doc = json.loads(_cli("summary", "--db", str(folder), "--job", str(job), "--format", "json"))
    raw = sqlite3.connect(BEFORE)
    top = raw.execute(
        "SELECT s.value, count(*), sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
        "JOIN StringIds s ON s.id = k.demangledName GROUP BY 1 ORDER BY 3 DESC LIMIT 3"
    ).fetchall()
    raw.close()
    got = [(k["name"], k["instances"], k["total_ns"]) for k in doc["top_kernels"][:3]]
    assert got == top
    assert doc["job"]["chosen"] and doc["job"]["job"] == job


def test_diagnose_findings_stay_inside_the_job(folder):
    ranks, job_of = _jobs(folder)
    for job in (None, job_of[BEFORE.name]):
        args = ["diagnose", "--db", str(folder), "--format", "json"] + (["--job", str(job)] if job else [])
        doc = json.loads(_cli(*args))
        shown = doc["job"]["scope"]["job"]
        assert job is None or shown == job
        assert doc["job"]["ranks"] == len(ranks[shown])
        for f in doc["findings"]:
            assert set(f["ranks"]) <= set(ranks[shown]), (f["id"], f["ranks"], shown)


def test_worst_rank_per_step_is_per_job(folder):
    """diag_step_causes groups by job: a worst rank is always one of its job's ranks."""
    ranks, _ = _jobs(folder)
    con = open_workspace(folder, read_only=True)
    rows = con.sql("SELECT job, worst_rank, ranks FROM diag_step_causes").fetchall()
    windows = con.sql("SELECT DISTINCT r.job FROM diag_windows d JOIN ranks r USING (rank)").fetchall()
    gpu_jobs = con.sql("SELECT DISTINCT r.job FROM time_partition t JOIN ranks r USING (rank)").fetchall()
    con.close()
    assert rows and all(w in ranks[j] and set(rs) <= set(ranks[j]) for j, w, rs in rows)
    assert sorted(windows) == sorted(gpu_jobs)  # every job with a partition keeps its windows


def test_unknown_job_is_one_line(folder):
    result = CliRunner().invoke(main, ["summary", "--db", str(folder), "--job", "99"])
    assert result.exit_code != 0 and "--job 99" in result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_report_names_the_job(folder, tmp_path):
    ranks, job_of = _jobs(folder)
    job = job_of[AFTER.name]
    out = tmp_path / "r.html"
    text = _cli("report", "--db", str(folder), "--job", str(job), "-o", str(out))
    assert f"showing job {job}" in " ".join(text.split())
    html = out.read_text()
    assert f"showing job {job} " in html and f"· {len(ranks[job])} rank(s) ·" in html


def test_compare_jobs_of_one_workspace_equals_compare_of_the_files(folder):
    """compare WS WS --before-job B --after-job A = compare of the two captures ingested alone."""
    _, job_of = _jobs(folder)
    args = ["compare", "--format", "json", "--no-findings"]
    direct = json.loads(_cli(*args, str(BEFORE), str(AFTER)))
    jobs = ["--before-job", str(job_of[BEFORE.name]), "--after-job", str(job_of[AFTER.name])]
    scoped = json.loads(_cli(*args, str(folder), str(folder), *jobs))
    assert scoped["runs"]["before"]["ranks"] == direct["runs"]["before"]["ranks"] == 2
    assert scoped["verdict"]["verdict"] == direct["verdict"]["verdict"]
    assert scoped["work_rate"]["delta_pct"] == pytest.approx(direct["work_rate"]["delta_pct"])
    assert any(f"showing job {job_of[BEFORE.name]}" in n for n in scoped["notes"])


def test_whatif_of_a_named_job_is_that_jobs_rows(tmp_path):
    """whatif --job N = the job-N rows of the unscoped whatif. Input: test_jobs' two synthetic
    data-parallel jobs an hour apart, steps from their periodic AllReduce, so both replay."""
    from nsight_analyze.analysis import refresh
    from tests.test_jobs import HOUR_NS, load, two_jobs

    db = tmp_path / "two.duckdb"
    con = open_workspace(db)
    load(con, *two_jobs(HOUR_NS))
    con.execute("UPDATE settings SET value = 'on' WHERE key = 'periodic_steps'")  # steps: the AllReduce
    refresh(con, force=True)
    con.close()
    every = json.loads(_cli("whatif", "--db", str(db), "--format", "json"))["scenarios"]
    assert {r["job"] for r in every} == {1, 2}
    for job in (1, 2):
        doc = json.loads(_cli("whatif", "--db", str(db), "--job", str(job), "--format", "json"))
        # one job shown: its rows without the job key (whatif_json names jobs only when several)
        assert doc["scenarios"] == [
            {k: v for k, v in r.items() if k != "job"} for r in every if r["job"] == job
        ]
    text = _cli("whatif", "--db", str(db), "--job", "2", "--format", "csv")
    assert len(text.strip().splitlines()) - 1 == len([r for r in every if r["job"] == 2])  # + header
    result = CliRunner().invoke(main, ["whatif", "--db", str(db), "--job", "99"])
    assert result.exit_code != 0 and "--job 99" in result.output and "Traceback" not in result.output
