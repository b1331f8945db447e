"""Nothing passes on no data (issue 16, item 8).

1. A failed ingest leaves the workspace as it was: no new file (nor .wal), an existing one keeps
   its data; one line per file saying why, one closing line, exit 1.
2. `diagnose` on a workspace without GPU operations says so in one line and exits 4
   (errors.NO_DATA_EXIT, docs/diagnose.md), never "no findings" with 0; other gates never pass.
3. `info` lists the files an ingest did not load (failed, skipped, ignored) with the reason.
4. `ingest` honours $NSIGHT_ANALYZE_DB like every other command; --db still wins.

The traces are the repository's sample_traces (4 ranks of one small nsys job), so these tests
need neither ../shared nor a GPU.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from conftest import ROOT

from nsight_analyze.cli import main
from nsight_analyze.errors import NO_DATA_EXIT, UserError
from nsight_analyze.ingest import inputs as ingest_inputs
from nsight_analyze.ingest import run as ingest_module
from nsight_analyze.ingest.run import ingest
from nsight_analyze.no_data import has_gpu_operations
from nsight_analyze.store.workspace import open_workspace

SAMPLE = ROOT / "sample_traces"
RANK0, RANK1 = SAMPLE / "report_rank0.sqlite", SAMPLE / "report_rank1.sqlite"
RANK0_KERNELS = 1516  # kernels of rank 0 in sample_traces (the ingest's closing table says so)


def cli(*args: str, env: dict[str, str | None] | None = None):
    """Run the CLI in-process; $NSIGHT_ANALYZE_DB is unset unless `env` sets it, and the terminal
    is wide enough that no message line is wrapped (render.terminal.echo wraps to $COLUMNS)."""
    return CliRunner().invoke(
        main, list(args), env={"NSIGHT_ANALYZE_DB": None, "COLUMNS": "1000", **(env or {})}
    )


def workspace_files(folder: Path) -> list[str]:
    """Workspace files (and their .wal) below a folder."""
    return sorted(p.name for p in folder.rglob("*") if ".duckdb" in p.name)


def query(db: Path, sql: str) -> list[tuple]:
    con = open_workspace(db, read_only=True, analyse=False)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def empty_workspace(db: Path) -> Path:
    """A workspace with the tables and views but no file in it (what a failed ingest used to leave)."""
    open_workspace(db, analyse=False).close()
    return db


def truncated_trace(folder: Path) -> Path:
    """The first third of a real export: SQLite header intact, the rest cut (a copy cut short)."""
    data = RANK0.read_bytes()
    path = folder / "truncated.sqlite"
    path.write_bytes(data[: len(data) // 3])
    return path


def not_a_trace(folder: Path) -> Path:
    path = folder / "notes.txt"
    path.write_text("training notes, not a trace\n")
    return path


def loaded_one_rank(tmp_path: Path) -> Path:
    db = tmp_path / "ws.duckdb"
    assert [o.status for o in ingest([RANK0], db).outcomes] == ["ok"]
    return db


def lines(text: str) -> list[str]:
    """The lines a command said, but the one saying it computes analysis on first use (the
    workspaces here are ingested with the first answers only; tests/test_lazy_analysis.py)."""
    return [line for line in text.splitlines() if line.strip() and not line.startswith("analysis: computing")]


# --------------------------------------------------------------------------------------------
# 1. A failed ingest leaves the workspace as it was


@pytest.mark.parametrize("make_bad", [not_a_trace, truncated_trace], ids=["not-a-trace", "truncated"])
def test_failed_ingest_creates_no_workspace(tmp_path, make_bad):
    folder = tmp_path / "traces"
    folder.mkdir()
    bad = make_bad(folder)
    result = cli("ingest", str(folder))
    # 1: the documented status of an ingest that loaded nothing (README, Ingest)
    assert result.exit_code == 1, result.output
    # the default workspace would be traces/nsight_analyze.duckdb: neither it nor its .wal exists
    assert workspace_files(tmp_path) == []
    # one line for the file (ignored: not a trace; failed: truncated), naming it and why
    assert lines(result.stderr) == [
        f"ignored: {bad}: not a recognised trace format"
        if make_bad is not_a_trace
        else f"failed: {bad}: unreadable SQLite database (database disk image is malformed)"
    ]
    # and one closing line saying nothing was ingested and no workspace was written
    (closing,) = lines(result.stdout)
    assert closing.startswith("nothing ingested (0 file(s) ingested") and closing.endswith(
        f"no workspace written at {folder / 'nsight_analyze.duckdb'}"
    )
    assert "Traceback" not in result.output


def test_failed_ingest_leaves_an_existing_workspace_with_its_data(tmp_path):
    db = loaded_one_rank(tmp_path)
    before = query(db, "SELECT rank, file_id, clock_offset_ns FROM ranks")
    folder = tmp_path / "bad"
    folder.mkdir()
    truncated_trace(folder)
    result = cli("ingest", str(folder), "--db", str(db), "-q")
    assert result.exit_code == 1, result.output  # nothing loaded: exit 1 as for a new workspace
    assert lines(result.stdout)[-1].endswith(f"{db} keeps its data")
    # the data is untouched: the same rank, the same kernels, and still one loaded file
    assert query(db, "SELECT rank, file_id, clock_offset_ns FROM ranks") == before
    assert query(db, "SELECT count(*) FROM kernels") == [(RANK0_KERNELS,)]
    assert query(db, "SELECT count(*) FROM files WHERE status = 'ok'") == [(1,)]
    # only the failure itself is recorded (README: an existing workspace records it)
    assert query(db, "SELECT status FROM files WHERE status <> 'ok'") == [("failed",)]


def test_an_error_during_ingest_removes_the_new_workspace(tmp_path, monkeypatch):
    """An ingest stopped by an error before any file loaded (here: refusing the traces) leaves
    no workspace behind either; the error is one line (exit 2, a UserError)."""

    def refuse(con, ready):
        raise UserError("refused for the test")

    monkeypatch.setattr(ingest_module, "refuse_mixed_formats", refuse)
    db = tmp_path / "ws.duckdb"
    with pytest.raises(UserError):
        ingest([RANK0], db)
    assert workspace_files(tmp_path) == []
    result = cli("ingest", str(RANK0), "--db", str(db))
    assert result.exit_code == 2 and lines(result.stderr) == ["error: refused for the test"]
    assert workspace_files(tmp_path) == []


def test_an_error_during_ingest_leaves_an_existing_workspace(tmp_path, monkeypatch):
    db = loaded_one_rank(tmp_path)
    monkeypatch.setattr(
        ingest_module, "refuse_mixed_formats", lambda con, ready: (_ for _ in ()).throw(UserError("no"))
    )
    with pytest.raises(UserError):
        ingest([RANK1], db)
    assert db.exists() and query(db, "SELECT count(*) FROM kernels") == [(RANK0_KERNELS,)]


# --------------------------------------------------------------------------------------------
# 2. diagnose (and every other gate) never passes on no data


def ranks_only_workspace(db: Path) -> Path:
    """A loaded file with a rank but not one GPU operation (e.g. a capture with CUDA tracing off)."""
    empty_workspace(db)
    con = duckdb.connect(str(db))
    con.execute(
        "INSERT INTO files VALUES (1, '/x.sqlite', 'abc', 1, 'nsys-sqlite', NULL, NULL, now(), 'ok', [], [])"
    )
    con.execute("INSERT INTO ranks (rank, file_id) VALUES (0, 1)")
    con.close()
    return db


@pytest.mark.parametrize("make", [empty_workspace, ranks_only_workspace], ids=["empty", "ranks-only"])
@pytest.mark.parametrize(
    "options",
    [[], ["--fail-on", "high"], ["--fail-on", "low", "--format", "json"], ["--format", "markdown"]],
    ids=["table", "fail-on-high", "fail-on-low-json", "markdown"],
)
def test_diagnose_without_gpu_data_says_so_and_exits_4(tmp_path, make, options):
    db = make(tmp_path / "ws.duckdb")
    result = cli("diagnose", "--db", str(db), *options)
    # 4 = NO_DATA_EXIT: neither 0 (a CI gate would pass) nor 1 (findings above --fail-on)
    assert result.exit_code == NO_DATA_EXIT == 4, result.output
    # one line on stderr, and nothing on stdout: no "no findings", no empty JSON document
    assert lines(result.stderr) == [
        f"error: no data to diagnose in {db}: the workspace has no GPU operations "
        "(nothing was ingested, or no file had any; see `nsight-analyze info`)"
    ]
    assert result.stdout == ""


def test_bad_input_is_said_before_no_data(tmp_path):
    db = empty_workspace(tmp_path / "ws.duckdb")
    result = cli("diagnose", "--db", str(db), "--threshold", "nope=1")
    # 2 = bad input (UserError): the typo is what the user must fix first, not the missing data
    assert result.exit_code == 2 and lines(result.stderr)[0].startswith("error: unknown threshold 'nope'")
    missing = cli("diagnose", "--db", str(tmp_path / "none.duckdb"))
    # 2 = no workspace at all: a missing file is bad input, not an empty workspace
    assert missing.exit_code == 2 and "no workspace at" in missing.stderr


def test_no_data_exit_is_documented():
    doc = (ROOT / "docs" / "diagnose.md").read_text()
    assert f"| {NO_DATA_EXIT} | no data to diagnose" in doc
    assert f"exits {NO_DATA_EXIT}" in cli("diagnose", "--help").stdout


def test_a_workspace_with_gpu_data_is_not_no_data(tmp_path):
    """The check only stops workspaces without GPU operations: one loaded rank passes it."""
    db = loaded_one_rank(tmp_path)
    con = open_workspace(db, read_only=True, analyse=False)
    try:
        assert has_gpu_operations(con) is True
    finally:
        con.close()
    con = open_workspace(empty_workspace(tmp_path / "empty.duckdb"), read_only=True, analyse=False)
    try:
        assert has_gpu_operations(con) is False
    finally:
        con.close()


def test_nsight_compute_only_workspace_has_data(tmp_path):
    """ncu reports have no timeline (no ranks, no kernels rows) but diagnose finds memory-bound
    kernels in them: a workspace with only Nsight Compute launches must not be refused as empty."""
    db = ncu_only_workspace(tmp_path / "ncu.duckdb")
    con = open_workspace(db, read_only=True, analyse=False)
    try:
        assert con.execute("SELECT count(*) FROM kernels").fetchone() == (0,)
        assert has_gpu_operations(con) is True
    finally:
        con.close()


def test_counters_only_workspace_says_what_it_holds(tmp_path):
    """DCGM samples without a trace: nothing to diagnose (exit 4), and the line says the workspace
    holds counters without a timeline and which commands read them, not that nothing was ingested.
    Expected count: the one sample planted here."""
    db = empty_workspace(tmp_path / "dcgm.duckdb")
    con = duckdb.connect(str(db))
    con.execute(
        "INSERT INTO gpu_metrics (file_id, source, metric_name, value) "
        "VALUES (1, 'dcgm', 'DCGM_FI_DEV_GPU_UTIL', 50)"
    )
    con.close()
    result = CliRunner().invoke(main, ["diagnose", "--db", str(db)])
    assert result.exit_code == NO_DATA_EXIT, result.output
    assert "counters without a timeline (1 DCGM samples)" in result.output, result.output
    assert "`gpus`, `mfu` and `sql` read them" in result.output


def ncu_only_workspace(db: Path) -> Path:
    """A workspace of Nsight Compute launches only (what `ingest` of ncu reports leaves): no rank."""
    empty_workspace(db)
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO ncu_kernels (file_id, launch_id, name, duration_ns) VALUES (1, 1, 'k', 1000)")
    con.close()
    return db


@pytest.mark.parametrize(
    "command, what",
    [
        ("ranks", "align and compare ranks"),
        ("comms", "break down communication"),
        ("whatif", "replay (what-if)"),
    ],
)
def test_commands_that_need_ranks_say_what_the_workspace_holds(tmp_path, command, what):
    """ranks, comms and whatif on a workspace without ranks: exit 4 and one line saying what it
    holds instead, not "run ingest first" to a user who did. Expected count: the one launch
    planted by ncu_only_workspace; the readers: diagnose reads ncu launches (has_gpu_operations)."""
    cases = [
        (
            ncu_only_workspace(tmp_path / "ncu.duckdb"),
            "it holds counters without a timeline (1 Nsight Compute kernel launches): `diagnose`, "
            "`gpus`, `mfu` and `sql` read them; a timeline needs nsys or PyTorch-profiler traces of "
            "the same run",
        ),
        (
            empty_workspace(tmp_path / "empty.duckdb"),
            "nothing was ingested: run `nsight-analyze ingest DIR` first",
        ),
    ]
    for db, why in cases:
        result = cli(command, "--db", str(db))
        assert result.exit_code == NO_DATA_EXIT, result.output
        assert lines(result.stderr) == [
            f"error: no data to {what} in {db}: the workspace has no ranks ({why})"
        ]


def test_summary_without_a_timeline_says_what_the_workspace_holds(tmp_path):
    """summary of an ncu-only workspace: no partition, and the line (and JSON `no_timeline`) says
    what the workspace holds; an empty one says only that there is nothing to partition."""
    db = ncu_only_workspace(tmp_path / "ncu.duckdb")
    result = cli("summary", "--db", str(db))
    assert result.exit_code == 0, result.output
    assert lines(result.stdout) == [
        "no GPU operations in this workspace (nothing to partition): it holds counters without a "
        "timeline (1 Nsight Compute kernel launches): `diagnose`, `gpus`, `mfu` and `sql` read them; "
        "a timeline needs nsys or PyTorch-profiler traces of the same run"
    ]
    doc = json.loads(cli("summary", "--db", str(db), "--format", "json").stdout)
    assert doc["partition"] == [] and "1 Nsight Compute kernel launches" in doc["no_timeline"]
    empty = empty_workspace(tmp_path / "empty.duckdb")
    assert json.loads(cli("summary", "--db", str(empty), "--format", "json").stdout)["no_timeline"] is None
    assert lines(cli("summary", "--db", str(empty)).stdout) == [
        "no GPU operations in this workspace (nothing to partition)"
    ]


def test_a_recipe_output_without_its_reports_is_not_called_empty(tmp_path):
    """An nsys-jax archive holds NVIDIA's nvtx_gpu_proj_trace rows, not the reports: diagnose has
    no GPU operation (exit 4) but must not say nothing was ingested. Expected count: the two rows
    planted here."""
    db = empty_workspace(tmp_path / "recipe.duckdb")
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO recipe_nvtx_gpu_proj (rank, name) VALUES (0, 'step'), (0, 'layer')")
    con.close()
    result = cli("diagnose", "--db", str(db))
    assert result.exit_code == NO_DATA_EXIT, result.output
    assert lines(result.stderr) == [
        f"error: no data to diagnose in {db}: the workspace has no GPU operations (it holds 2 rows of an "
        "nvtx_gpu_proj_trace recipe output without the reports it was computed from: `sql` reads them "
        "(recipe_nvtx_gpu_proj); ingest the reports for a timeline)"
    ]


def test_compare_gate_on_empty_workspaces_fails(tmp_path):
    db = empty_workspace(tmp_path / "ws.duckdb")
    result = cli("compare", str(db), str(db), "--fail-on-regression", "5")
    # 4 = no data (as diagnose), said in one line (not 0, the gate's "pass")
    assert result.exit_code == NO_DATA_EXIT, result.output
    assert lines(result.stderr) == [
        f"error: no data to compare in {db}: the workspace has no GPU operations "
        "(nothing was ingested, or no file had any; see `nsight-analyze info`)"
    ]
    # without the gate, compare still says why there is nothing to compare: no ranks at all is no
    # data (4), with what the workspace holds instead, not "no rank in common"
    for ws, why in [
        (db, "nothing was ingested: run `nsight-analyze ingest DIR` first"),
        (
            ncu_only_workspace(tmp_path / "ncu.duckdb"),
            "it holds counters without a timeline (1 Nsight Compute kernel launches): `diagnose`, "
            "`gpus`, `mfu` and `sql` read them; a timeline needs nsys or PyTorch-profiler traces of "
            "the same run",
        ),
    ]:
        result = cli("compare", str(ws), str(ws))
        assert result.exit_code == NO_DATA_EXIT, result.output
        assert lines(result.stderr) == [
            f"error: no data to compare in {ws} (before): the workspace has no ranks ({why})"
        ]


def test_compare_of_runs_without_a_common_rank_says_so(tmp_path):
    """Two runs that each have ranks, but not the same ones (sample ranks 0, 1 against 2, 3): a
    UserError (2) naming the cause and the way out, not no data. One rank each (rank 0 against
    rank 1) is compared, with a note (docs/compare.md "Setup and rank pairs")."""
    dbs = []
    for name, traces in (
        ("r01", (RANK0, RANK1)),
        ("r23", tuple(SAMPLE / f"report_rank{r}.sqlite" for r in (2, 3))),
    ):
        folder = tmp_path / name
        folder.mkdir()
        for trace in traces:
            shutil.copy(trace, folder / trace.name)
        dbs.append(tmp_path / f"{name}.duckdb")
        ingest([folder], dbs[-1])
    result = cli("compare", *map(str, dbs), "--no-findings")
    assert result.exit_code == 2, result.output
    assert lines(result.stderr) == [
        "error: the two runs have no rank in common: nothing to compare (pair ranks with --ranks "
        "BEFORE=AFTER; before has ranks 0, 1, after ranks 2, 3)"
    ]
    singles = []
    for trace in (RANK0, RANK1):
        folder = tmp_path / trace.stem
        folder.mkdir()
        shutil.copy(trace, folder / trace.name)
        singles.append(tmp_path / f"{trace.stem}.duckdb")
        ingest([folder], singles[-1])
    result = cli("compare", *map(str, singles), "--no-findings")
    assert result.exit_code == 0, result.output
    assert "each run holds one rank (before rank 0, after rank 1)" in result.stdout


def test_compare_gate_on_workspaces_without_gpu_data_fails(tmp_path):
    db = ranks_only_workspace(tmp_path / "ws.duckdb")
    result = cli("compare", str(db), str(db), "--fail-on-regression", "5")
    assert result.exit_code == NO_DATA_EXIT, result.output
    assert lines(result.stderr) == [
        f"error: no data to compare in {db}: the workspace has no GPU operations "
        "(nothing was ingested, or no file had any; see `nsight-analyze info`)"
    ]


def test_compare_without_gpu_data_says_why_once_and_guesses_no_imbalance(tmp_path):
    """Without the gate compare answers (exit 0), but says the runs are not comparable once, and
    the imbalance it cannot know is "unknown" (null in JSON), not the string "None"."""
    db = ranks_only_workspace(tmp_path / "ws.duckdb")
    result = cli("compare", str(db), str(db))
    assert result.exit_code == 0, result.output
    out = " ".join(result.stdout.split())
    assert out.startswith("neutral: neither run has step windows"), out
    assert out.count("no kernel work in BEFORE's windows of the common ranks") == 1, out
    assert out.count("imbalance unknown") == 2 and "None" not in out, out
    doc = json.loads(cli("compare", str(db), str(db), "--format", "json").stdout)
    assert doc["imbalance"]["before"]["verdict"] is None  # JSON null, not the string "None"


def test_compare_gate_on_traces_without_gpu_data_fails(tmp_path):
    """A trace folder compare ingests itself is checked after the ingest: a rank, no GPU operation."""
    good = tmp_path / "good"
    good.mkdir()
    shutil.copy(RANK0, good / "report_rank0.sqlite")
    bare = tmp_path / "bare"
    bare.mkdir()
    trace = bare / "report_rank0.sqlite"
    shutil.copy(RANK0, trace)
    con = sqlite3.connect(trace)
    for (table,) in con.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND (name LIKE 'CUPTI_ACTIVITY_KIND_KERNEL%' "
        "OR name LIKE 'CUPTI_ACTIVITY_KIND_MEM%')"
    ).fetchall():
        con.execute(f"DELETE FROM {table}")
    con.commit()
    con.close()
    result = cli("compare", str(good), str(bare), "--fail-on-regression", "5", "--no-findings")
    assert result.exit_code == NO_DATA_EXIT, result.output
    assert lines(result.stderr) == [
        f"error: no data to compare in {bare} (after): its traces have no GPU operations "
        "(see `nsight-analyze ingest` and `info` on them)"
    ]


# --------------------------------------------------------------------------------------------
# 3. info lists the files that were not loaded, with the reason


def mixed_folder(tmp_path: Path) -> Path:
    """rank 0 (loads), a text file (ignored) and a truncated export (fails)."""
    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copy(RANK0, folder / "rank0.sqlite")
    not_a_trace(folder)
    truncated_trace(folder)
    return folder


def test_info_lists_failed_and_ignored_files_with_their_reason(tmp_path):
    folder = mixed_folder(tmp_path)
    db = tmp_path / "ws.duckdb"
    assert cli("ingest", str(folder), "--db", str(db), "-q").exit_code == 1  # 1: a file failed
    result = cli("info", "--db", str(db))
    assert result.exit_code == 0, result.output
    out = result.stdout.splitlines()
    # worded like ingest's own lines, with absolute paths as in the files table
    assert f"ignored: {folder / 'notes.txt'}: not a recognised trace format" in out
    truncated = folder / "truncated.sqlite"
    assert f"failed: {truncated}: unreadable SQLite database (database disk image is malformed)" in out
    doc = json.loads(cli("info", "--db", str(db), "--format", "json").stdout)
    assert [(Path(r["path"]).name, r["status"]) for r in doc["not_loaded"]] == [
        ("notes.txt", "ignored"),
        ("truncated.sqlite", "failed"),
    ]
    # "files" stays the loaded files (the HTML report counts them): only rank0.sqlite
    assert [Path(f["path"]).name for f in doc["files"]] == ["rank0.sqlite"]
    # a not-loaded file's reason is no warning of the workspace
    assert not any("notes.txt" in w for w in doc["warnings"])


def test_a_recorded_failure_is_replaced_when_the_file_is_ingested_again(tmp_path):
    folder = mixed_folder(tmp_path)
    db = tmp_path / "ws.duckdb"
    cli("ingest", str(folder), "--db", str(db), "-q")
    # the same failing file again: still failed (its recorded hash is no content of the
    # workspace, so it is not "unchanged"), and still one row for it
    again = ingest([folder], db)
    assert {o.path.name: o.status for o in again.outcomes}["truncated.sqlite"] == "failed"
    assert query(db, "SELECT count(*) FROM files WHERE path LIKE '%truncated.sqlite'") == [(1,)]
    # fixed in place: it loads (rank 1), and its failure row is gone
    truncated = folder / "truncated.sqlite"
    truncated.unlink()
    shutil.copy(RANK1, truncated)
    fixed = ingest([truncated], db)
    assert [o.status for o in fixed.outcomes] == ["ok"]
    assert query(db, "SELECT status FROM files WHERE path LIKE '%truncated.sqlite'") == [("ok",)]
    doc = json.loads(cli("info", "--db", str(db), "--format", "json").stdout)
    assert [Path(r["path"]).name for r in doc["not_loaded"]] == ["notes.txt"]


def test_skipped_reports_are_recorded(tmp_path):
    """An .nsys-rep without nsys on PATH is skipped; info lists it as skipped, with why."""
    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copy(RANK0, folder / "rank0.sqlite")
    (folder / "rank1.nsys-rep").write_bytes(b"not really a report")
    db = tmp_path / "ws.duckdb"
    old_path = os.environ["PATH"]
    os.environ["PATH"] = str(Path(sys.executable).parent)  # no nsys here
    try:
        report = ingest([folder], db)
    finally:
        os.environ["PATH"] = old_path
    assert sorted(o.status for o in report.outcomes) == ["ok", "skipped"]
    doc = json.loads(cli("info", "--db", str(db), "--format", "json").stdout)
    assert [(Path(r["path"]).name, r["status"], r["reason"]) for r in doc["not_loaded"]] == [
        ("rank1.nsys-rep", "skipped", "nsys CLI not on PATH")
    ]


def test_a_dangling_link_is_recorded_under_its_own_name(tmp_path):
    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copy(RANK0, folder / "rank0.sqlite")
    (folder / "rank1.sqlite").symlink_to(folder / "gone.sqlite")
    db = tmp_path / "ws.duckdb"
    ingest([folder], db)
    ((path, status),) = query(db, "SELECT path, status FROM files WHERE status <> 'ok'")
    # its name, not the missing target's: the user knows the link, not where it pointed
    assert (path, status) == (str(folder / "rank1.sqlite"), "failed")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_named_pipe_is_reported_and_never_opened(tmp_path):
    """A FIFO in the folder was dropped without a word; given as the input, sniffing its format
    opened it and the ingest waited forever for a writer. Now each is one `ignored` line and a
    `files` row. In a subprocess with a timeout: a hang fails the test instead of stalling it."""
    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copy(RANK0, folder / "rank0.sqlite")
    os.mkfifo(folder / "rank1.sqlite")
    db = tmp_path / "ws.duckdb"
    run = [sys.executable, "-m", "nsight_analyze", "ingest"]
    result = subprocess.run([*run, str(folder), "--db", str(db)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    line = f"ignored: {folder / 'rank1.sqlite'}: a named pipe (FIFO), not a regular file: not read"
    assert line in result.stderr.splitlines(), result.stderr
    assert query(db, "SELECT status, count(*) FROM files GROUP BY ALL ORDER BY ALL") == [
        ("ignored", 1),
        ("ok", 1),
    ]
    alone = tmp_path / "alone.duckdb"
    result = subprocess.run(
        [*run, str(folder / "rank1.sqlite"), "--db", str(alone)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1 and line in result.stderr.splitlines(), result.stderr
    assert not alone.exists()


@pytest.mark.skipif(sys.platform != "linux", reason="a name that is not UTF-8 needs a bytes filesystem")
def test_a_file_name_that_is_not_utf8_fails_alone(tmp_path):
    """A trace whose name is not UTF-8 (latin-1 bytes on a Linux filesystem) stopped the whole
    ingest with "error: UnicodeEncodeError: ... surrogates not allowed", nothing loaded. DuckDB
    cannot open such a name, so that file alone fails, in one line showing the byte as \\xff, and
    is recorded; the others load."""
    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copy(RANK0, folder / "rank0.sqlite")
    odd = os.fsdecode(os.fsencode(folder) + b"/rank\xff1.sqlite")
    shutil.copy(RANK1, odd)
    db = tmp_path / "ws.duckdb"
    run = [sys.executable, "-m", "nsight_analyze", "ingest", str(folder), "--db", str(db)]
    result = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stderr  # a file failed
    shown = f"{folder}/rank\\xff1.sqlite"
    line = f"failed: {shown}: {ingest_inputs.NOT_UTF8}"
    assert ingest_inputs.NOT_UTF8.startswith("its path is not valid UTF-8, which DuckDB cannot open")
    assert line in result.stderr.splitlines(), result.stderr
    assert query(db, "SELECT path, status FROM files ORDER BY ALL") == [
        (str(folder / "rank0.sqlite"), "ok"),
        (shown, "failed"),
    ]
    wide = {**os.environ, "COLUMNS": "400"}
    info = subprocess.run([*run[:3], "info", "--db", str(db)], capture_output=True, text=True, env=wide)
    assert info.returncode == 0 and shown in info.stdout, info.stderr


@pytest.mark.skipif(sys.platform != "linux", reason="a name that is not UTF-8 needs a bytes filesystem")
def test_a_workspace_name_that_is_not_utf8_is_one_line(tmp_path):
    """A workspace DuckDB cannot name (--db with a latin-1 byte, or a folder so named whose
    default workspace lies inside it) stopped with "error: UnicodeEncodeError", exit 1. It is
    refused in one line saying what to do, exit 2, and nothing is created."""
    odd_folder = Path(os.fsdecode(os.fsencode(tmp_path) + b"/traces\xff"))
    odd_folder.mkdir()
    shutil.copy(RANK0, odd_folder / "rank0.sqlite")
    good = tmp_path / "good"
    good.mkdir()
    shutil.copy(RANK0, good / "rank0.sqlite")
    odd_db = os.fsdecode(os.fsencode(tmp_path) + b"/ws\xff.duckdb")
    for args in ([str(odd_folder)], [str(good), "--db", odd_db]):
        run = [sys.executable, "-m", "nsight_analyze", "ingest", *args]
        result = subprocess.run(run, capture_output=True, text=True, timeout=300)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1, result.stderr
        assert "its path is not valid UTF-8, which DuckDB cannot open: give --db a UTF-8 name" in lines[0]
        assert "\\xff" in lines[0], lines
    assert sorted(p.name for p in good.iterdir()) == ["rank0.sqlite"]
    assert not Path(odd_db).exists()


# --------------------------------------------------------------------------------------------
# 4. ingest honours $NSIGHT_ANALYZE_DB; --db wins


def test_ingest_writes_the_workspace_of_nsight_analyze_db(tmp_path):
    env_db = tmp_path / "env.duckdb"
    result = cli("ingest", str(RANK0), "-q", env={"NSIGHT_ANALYZE_DB": str(env_db)})
    assert result.exit_code == 0, result.output
    assert lines(result.stdout)[-1].startswith(f"workspace {env_db}: 1 file(s) ingested")
    assert env_db.exists() and not (SAMPLE / "nsight_analyze.duckdb").exists()  # not beside the input
    # the analysis commands read the same workspace without --db
    doc = json.loads(cli("info", "--format", "json", env={"NSIGHT_ANALYZE_DB": str(env_db)}).stdout)
    assert [Path(f["path"]).name for f in doc["files"]] == ["report_rank0.sqlite"]


def test_db_option_wins_over_nsight_analyze_db(tmp_path):
    env_db, given = tmp_path / "env.duckdb", tmp_path / "given.duckdb"
    result = cli("ingest", str(RANK0), "--db", str(given), "-q", env={"NSIGHT_ANALYZE_DB": str(env_db)})
    assert result.exit_code == 0, result.output
    assert given.exists() and not env_db.exists()


def test_empty_nsight_analyze_db_means_unset(tmp_path):
    """NSIGHT_ANALYZE_DB= (empty) is the default: DIR/nsight_analyze.duckdb, as without it."""
    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copy(RANK0, folder / "rank0.sqlite")
    result = cli("ingest", str(folder), "-q", env={"NSIGHT_ANALYZE_DB": ""})
    assert result.exit_code == 0, result.output
    assert workspace_files(tmp_path) == ["nsight_analyze.duckdb"]


def test_ingest_help_names_the_variable():
    assert "$NSIGHT_ANALYZE_DB" in cli("ingest", "--help").stdout


def test_ranks_only_workspace_is_a_valid_fixture(tmp_path):
    """The ranks-only workspace above is a real workspace (info reads it), not a broken file."""
    db = ranks_only_workspace(tmp_path / "ws.duckdb")
    doc = json.loads(cli("info", "--db", str(db), "--format", "json").stdout)
    assert len(doc["ranks"]) == 1 and doc["event_counts"]["kernels"] == 0


# --------------------------------------------------------------------------------------------
# A write that finds no room: a full disk, a quota, the process's file size limit
# --------------------------------------------------------------------------------------------


def _limited(args: list[str], limit: int, home: Path) -> subprocess.CompletedProcess:
    """`nsight-analyze ARGS` under a file size limit (RLIMIT_FSIZE, SIGXFSZ ignored): DuckDB and
    Python then meet "File too large" (EFBIG) at the limit as they meet "No space left on device"
    on a full disk, through the same write paths, so a test needs no small filesystem to mount."""
    import resource
    import signal

    def limit_writes() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = {**os.environ, "HOME": str(home)}  # the workspace template is built under the limit too
    run = [sys.executable, "-m", "nsight_analyze", *args]
    return subprocess.run(run, capture_output=True, text=True, timeout=300, env=env, preexec_fn=limit_writes)


NO_ROOM_ADVICE = "free space or write to another disk, then run the command again"


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE and SIGXFSZ as on Linux")
@pytest.mark.parametrize("limit, jobs", [(1 << 20, "1"), (8 << 20, "1"), (8 << 20, "2")])
def test_a_full_disk_stops_the_ingest_in_one_line_and_leaves_no_new_workspace(tmp_path, limit, jobs):
    """A workspace write that found no room said "error: TransactionException: ... cannot
    rollback - no transaction is active", exit 1 (the failed COMMIT had rolled back already), and
    left the half-written workspace (and its log) on the full disk; a full disk at the close's
    checkpoint was not said at all. Now: one line naming the file and what to do, exit 2, and
    a new workspace is removed: at 1 MiB the first file's commit fails, at 8 MiB the checkpoint
    after everything loaded, in this process or in workers (whose rank store is removed too)."""
    db = tmp_path / "ws.duckdb"
    result = _limited(["ingest", str(SAMPLE), "--db", str(db), "--jobs", jobs, "-q"], limit, tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: cannot write ("), lines
    assert "File too large" in lines[0] and lines[0].endswith(NO_ROOM_ADVICE), lines
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != ".cache") == []


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE and SIGXFSZ as on Linux")
@pytest.mark.parametrize(
    "args, limit",
    [
        (["summary", "-o", "{out}/summary.csv"], 100),
        (["report", "-o", "{out}/report.html"], 1 << 20),
        (["export", "{out}/tables", "--format", "parquet"], 1 << 12),
        (["export", "{out}/job.json", "--format", "chrome-trace"], 1 << 16),
    ],
    ids=["summary-o", "report", "export-parquet", "export-chrome"],
)
def test_an_output_that_finds_no_room_is_one_line_and_leaves_nothing(sample_workspace, tmp_path, args, limit):
    """`summary -o` said "wrote summary.csv" and kept half a file when its close found the disk
    full; `report` left `report.html.tmp`; a Parquet export left a new folder of some of the
    tables. Each is now one line, exit 2, and the output folder is as it was (empty)."""
    out = tmp_path / "out"
    out.mkdir()
    filled = [a.replace("{out}", str(out)) for a in args]
    result = _limited([*filled, "--db", str(sample_workspace)], limit, tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert lines[-1].startswith("error: cannot write (") and lines[-1].endswith(NO_ROOM_ADVICE), lines
    assert not any("wrote" in line for line in lines), lines
    assert list(out.iterdir()) == []


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE and SIGXFSZ as on Linux")
def test_a_full_disk_leaves_an_existing_workspace_readable(tmp_path):
    """An ingest into an existing workspace whose checkpoint finds no room stops in one line;
    what it committed is in the workspace's log, so the workspace opens and answers afterwards
    (here with both files: the loads committed, only the checkpoint failed)."""
    db = tmp_path / "ws.duckdb"
    ingest([RANK0], db)
    more = tmp_path / "more"
    more.mkdir()
    shutil.copy(RANK1, more / "rank1.sqlite")
    result = _limited(["ingest", str(more), "--db", str(db), "-q"], db.stat().st_size, tmp_path)
    assert result.returncode == 2 and result.stderr.strip().endswith(NO_ROOM_ADVICE), result.stderr
    summary = CliRunner().invoke(main, ["summary", "--db", str(db), "--format", "csv"])
    assert summary.exit_code == 0, summary.output
    assert query(db, "SELECT count(*) FROM files WHERE status = 'ok'") == [(2,)]


def test_utf16_text_is_said_as_such(tmp_path):
    """A CSV or scrape redirected to a file by Windows PowerShell is UTF-16: it was ignored as
    "not a recognised trace format", which sends the user looking at its content, not its
    encoding. Expected: the BOM's encoding named, with the conversion to run."""
    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copy(RANK0, folder / "rank0.sqlite")
    (folder / "ncu.csv").write_bytes('"ID","Kernel Name"\n"0","gemm"\n'.encode("utf-16"))
    report = ingest([folder], tmp_path / "ws.duckdb")
    said = {o.path.name: (o.status, o.message) for o in report.outcomes}
    assert said["ncu.csv"] == (
        "ignored",
        "UTF-16 text, not a recognised trace format: convert it to UTF-8 (iconv -f UTF-16 -t UTF-8)",
    )
    assert said["rank0.sqlite"][0] == "ok"
