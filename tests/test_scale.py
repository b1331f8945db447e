"""Rank-parallel ingest (issue 17): worker processes (`--jobs 2`) and a Dask cluster
(`--dask local:2`, loopback only) give the workspace the single-process ingest gives, table for
table and row for row; faults (a worker dying, a killed client, an unreachable scheduler) leave a
consistent workspace that a rerun completes.

The oracle of every comparison is the single-process ingest (`jobs=1`, the path every other test
checks against ground truth and peer tools) of the same files.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from conftest import SHARED, rounded_select

from nsight_analyze import synth
from nsight_analyze.cli import main
from nsight_analyze.ingest import rank_store
from nsight_analyze.ingest.rank_task import CRASH_ENV
from nsight_analyze.ingest.run import ingest

pytest.importorskip(
    "distributed", reason="the Dask extra (pip install 'nsight-analyze[dask]') is not installed"
)

REAL_NSYS = SHARED / "traces" / "nsys" / "nsys-ai"
# columns whose values depend on when or in which order files landed, not on their content
VOLATILE = {"ingested_at"}
BY_LANDING = {"ingested_at", "file_id"}


def digests(db: Path, skip: set[str] = VOLATILE) -> dict[str, tuple]:
    """Per workspace table: (row count, order-independent hash of its rows) over its columns
    except `skip`; floating-point values to 10 significant digits (conftest.rounded_select)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        out = {}
        tables = con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' AND table_name <> 'meta'"
        ).fetchall()
        for (table,) in tables:
            rows = rounded_select(con, table, skip)
            out[table] = con.execute(f"SELECT count(*), sum(hash(_row)) FROM ({rows}) _row").fetchone()
        return out
    finally:
        con.close()


def assert_same(a: dict, b: dict) -> None:
    assert set(a) == set(b)
    differ = {t: (a[t], b[t]) for t in a if a[t] != b[t]}
    assert not differ, differ


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("scale") / "traces"
    synth.generate(out, ranks=8, steps=3, kernels_per_step=40, seed=5)
    return out


@pytest.fixture(scope="module")
def single(job, tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("single") / "ws.duckdb"
    report = ingest([job], db, jobs=1, analyze="all")
    assert len(report.by_status("ok")) == 8
    return db


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nsight_analyze", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
    )


def test_two_worker_processes_give_the_single_process_tables(job, single, tmp_path):
    db = tmp_path / "ws.duckdb"
    report = ingest([job], db, jobs=2, analyze="all")
    assert len(report.by_status("ok")) == 8 and not report.failed
    assert_same(digests(single), digests(db))
    assert digests(single)["gaps"][0] > 0  # a comparison of empty tables would prove nothing
    assert not rank_store.store_dir(db).exists()  # every entry landed: nothing left beside it


def test_dask_local_cluster_gives_the_single_process_tables(job, single, tmp_path):
    db = tmp_path / "ws.duckdb"
    result = _cli("ingest", str(job), "--db", str(db), "--dask", "local:2", "-q", "--analyze", "all")
    assert result.returncode == 0, result.stderr
    assert_same(digests(single), digests(db))


@pytest.mark.skipif(not REAL_NSYS.is_dir(), reason=f"{REAL_NSYS} (shared real traces) is absent")
def test_real_nsys_traces_in_workers_and_on_dask(tmp_path):
    one, two, dask = tmp_path / "one.duckdb", tmp_path / "two.duckdb", tmp_path / "dask.duckdb"
    ingest([REAL_NSYS], one, jobs=1, analyze="all")
    ingest([REAL_NSYS], two, jobs=2, analyze="all")
    ingest([REAL_NSYS], dask, dask="local:2", analyze="all")
    expected = digests(one)
    assert expected["kernels"][0] > 0
    assert_same(expected, digests(two))
    assert_same(expected, digests(dask))


def test_a_worker_dying_once_is_retried(job, single, tmp_path):
    db = tmp_path / "ws.duckdb"
    marks = tmp_path / "marks"
    marks.mkdir()
    os.environ[CRASH_ENV] = f"rank3@{marks}"  # read by the client, sent with each task
    try:
        report = ingest([job], db, jobs=2, analyze="all")
    finally:
        del os.environ[CRASH_ENV]
    assert (marks / "report_rank3.sqlite.crashed").exists()  # the crash did happen
    assert not report.failed
    assert_same(digests(single), digests(db))


def test_a_file_whose_worker_dies_twice_fails_alone_and_the_rerun_completes(job, single, tmp_path):
    db = tmp_path / "ws.duckdb"
    result = _cli(
        "ingest", str(job), "--db", str(db), "--jobs", "2", "-q", "--analyze", "all", env={CRASH_ENV: "rank3"}
    )
    assert result.returncode == 1
    failed = [line for line in result.stderr.splitlines() if line.startswith("failed:")]
    assert len(failed) == 1 and "report_rank3" in failed[0] and "died twice" in failed[0]
    assert "Traceback" not in result.stderr
    assert "7 file(s) ingested" in result.stdout
    rerun = _cli("ingest", str(job), "--db", str(db), "--jobs", "2", "-q", "--analyze", "all")
    assert rerun.returncode == 0, rerun.stderr
    assert "1 file(s) ingested, 7 unchanged" in rerun.stdout  # only the missing file was processed
    assert_same(digests(single, BY_LANDING), digests(db, BY_LANDING))


def test_a_killed_client_leaves_a_workspace_the_rerun_completes(job, single, tmp_path):
    db = tmp_path / "ws.duckdb"
    store = rank_store.store_dir(db)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nsight_analyze",
            "ingest",
            str(job),
            "--db",
            str(db),
            "--jobs",
            "2",
            "-q",
            "--analyze",
            "all",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if store.is_dir() and any(rank_store.read_manifest(e) for e in store.iterdir()):
            break  # a worker finished a file: the client is landing files now
        time.sleep(0.01)
    killed = proc.poll() is None
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    if not killed:
        pytest.skip("the ingest finished before it could be killed (machine too fast for this check)")
    rerun = _cli("ingest", str(job), "--db", str(db), "--jobs", "2", "-q", "--analyze", "all")
    assert rerun.returncode == 0, rerun.stderr
    assert_same(digests(single, BY_LANDING), digests(db, BY_LANDING))
    assert not store.exists()


def test_an_unreachable_scheduler_is_one_line_within_the_timeout(job, tmp_path):
    db = tmp_path / "ws.duckdb"
    started = time.monotonic()
    result = _cli(
        "ingest",
        str(job),
        "--db",
        str(db),
        "--dask",
        "tcp://127.0.0.1:9",
        env={"NSIGHT_ANALYZE_DASK_TIMEOUT": "2"},
    )
    assert result.returncode != 0
    assert time.monotonic() - started < 60
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach the Dask scheduler" in lines[0], result.stderr
    assert not db.exists()


def test_a_server_that_is_not_a_scheduler_is_one_line(job, tmp_path):
    """An address that answers, but not as Dask (here an HTTP server's reply, as a dashboard or a
    proxy gives): one line naming the cause, not distributed's MemoryError from reading the reply
    as a frame length."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def answer() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:  # closed: the test is over
                return
            with conn:
                conn.sendall(b"HTTP/1.0 426 Upgrade Required\r\nserver: test\r\ncontent-length: 0\r\n\r\n")

    threading.Thread(target=answer, daemon=True).start()
    db = tmp_path / "ws.duckdb"
    try:
        result = _cli(
            "ingest",
            str(job),
            "--db",
            str(db),
            "--dask",
            f"tcp://127.0.0.1:{port}",
            env={"NSIGHT_ANALYZE_DASK_TIMEOUT": "5"},
        )
    finally:
        server.close()
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "did not answer as a Dask scheduler" in lines[0], result.stderr
    assert not db.exists()


def test_a_bad_dask_timeout_is_one_line(job, tmp_path):
    """$NSIGHT_ANALYZE_DASK_TIMEOUT that is not a positive number: one line naming it (it was a
    ValueError of float(), exit 1; a negative one reached distributed)."""
    for value in ("abc", "-1"):
        result = CliRunner().invoke(
            main,
            ["ingest", str(job), "--db", str(tmp_path / "ws.duckdb"), "--dask", "tcp://127.0.0.1:9"],
            env={"NSIGHT_ANALYZE_DASK_TIMEOUT": value},
        )
        assert result.exit_code == 2, result.output
        assert result.stderr.strip() == (
            f"error: $NSIGHT_ANALYZE_DASK_TIMEOUT={value!r}: give the seconds to wait for the scheduler, "
            "e.g. 30"
        )


def test_dask_without_the_extra_says_how_to_install_it(job, tmp_path):
    code = (
        "import sys; sys.modules['distributed'] = None; from nsight_analyze.cli import main; "
        f"main(['ingest', {str(job)!r}, '--db', {str(tmp_path / 'ws.duckdb')!r}, '--dask', 'local:2'])"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'nsight-analyze[dask]'" in lines[0], result.stderr


def test_bad_dask_address_forms(job, tmp_path):
    """Each is one line, exit 2, before anything is read. A garbled or empty scheduler file was
    "the server ... did not answer as a Dask scheduler (AssertionError in the handshake)", about a
    server never contacted; an empty address (an unset variable) ingested locally without a word."""
    (tmp_path / "garbled.json").write_text("{garbled")
    (tmp_path / "empty.json").write_text("{}")
    runner = CliRunner()
    for address, said in (
        ("local:x", "use local:N"),
        (str(tmp_path / "none.json"), "no such scheduler file"),
        (str(tmp_path / "garbled.json"), "not a Dask scheduler file (Expecting property name"),
        (str(tmp_path / "empty.json"), 'not a Dask scheduler file (no "address" in it)'),
        ("", "--dask '': give a scheduler address"),
    ):
        result = runner.invoke(
            main, ["ingest", str(job), "--db", str(tmp_path / "ws.duckdb"), "--dask", address]
        )
        assert result.exit_code == 2 and said in result.output, result.output
        assert not (tmp_path / "ws.duckdb").exists()
