"""The workspace: every view loads, the file is plain DuckDB, busy and read-only behaviour."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import time

import duckdb
import pytest
from conftest import ROOT, TRACES, requires_shared

from nsight_analyze.errors import UserError
from nsight_analyze.ingest.run import ingest
from nsight_analyze.store import query_layer
from nsight_analyze.store.duck import MEMORY_ENV, analysis_memory_limit, sql_rows, sql_value
from nsight_analyze.store.workspace import open_workspace, query_files

CLI = [sys.executable, "-m", "nsight_analyze"]


def test_sql_literals_read_back_as_the_values():
    """The literals that replace bound parameters (a bound one imports pandas: duck.sql_string)
    read back as the Python values, hostile text included; expected: the values themselves."""
    import decimal
    import math

    values = [None, True, False, 0, -7, 2**63 - 1, 2**70, 0.1, 1 / 3, 1e-300, -2.5e300, math.inf, -math.inf,
              "", "it's", "a'); DROP TABLE files; --", "tab\tnew\nline", "nul\x00inside", "\\x00 ü 😀",
              decimal.Decimal("12.345"), decimal.Decimal("1E+30"), [1, None, 3], ["x", "y'"], []]  # fmt: skip
    con = duckdb.connect()
    for v in values:
        got = con.execute(f"SELECT {sql_value(v)}").fetchone()[0]
        assert got == v, (v, got)
    assert math.isnan(con.execute(f"SELECT {sql_value(math.nan)}").fetchone()[0])
    rows = [(1, "a", None, 2.5), (2, "b'c", True, -1e20)]
    con.execute("CREATE TABLE t (i INTEGER, s VARCHAR, b BOOLEAN, d DOUBLE)")
    con.execute(f"INSERT INTO t VALUES {sql_rows(rows)}")
    assert con.execute("SELECT * FROM t ORDER BY i").fetchall() == rows
    with pytest.raises(TypeError):
        sql_value(object())


def test_every_query_file_loads_and_documents_itself(tmp_path):
    con = open_workspace(tmp_path / "w.duckdb")  # raises when a query does not load
    stored = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert set(query_layer.stored("rank")) | set(query_layer.stored("job")) <= stored
    for path in query_files():
        text = path.read_text()
        assert "CREATE OR REPLACE" in text, path.name
        header = text[: text.index("CREATE OR REPLACE")].splitlines()
        # the header convention (docs/architecture.md "Queries"): comment lines only, opening with
        # "-- NAME: what it is" ("-- NAME(args): ..." for a macro), saying why it exists, and
        # declaring its stage and what it requires (query_layer.parse reads those two)
        assert header and all(line.startswith("--") for line in header if line.strip()), path.name
        assert re.match(rf"-- {re.escape(path.stem)}[:(]", header[0]), f"{path.name}: {header[0]!r}"
        assert [line for line in header if re.match(r"-- (Why|Purpose): \S", line)], f"{path.name}: no Why:"
        for key in ("stage", "requires"):
            assert [line for line in header if re.match(rf"-- {key}: \S", line)], f"{path.name}: no {key}:"


@requires_shared
def test_workspace_is_plain_duckdb_with_views(tmp_path):
    db = tmp_path / "w.duckdb"
    # every stored result computed (`ingest --analyze all`): a plain duckdb shell reads them all
    ingest([TRACES / "nsys/nsys-ai/mock.sqlite"], db, analyze="all")
    con = duckdb.connect(str(db), read_only=True)  # no nsight-analyze code involved
    views = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    public = [q for q in query_layer.layer() if not q.private and q.kind == "view"]
    assert {q.name for q in public if q.stage == "live"} <= views
    assert {q.name for q in public if q.result == "stored"} <= tables
    assert con.execute("SELECT count(*) FROM kernels").fetchone()[0] == 2


@requires_shared
def test_sql_command_formats_and_read_only(tmp_path):
    db = tmp_path / "w.duckdb"
    ingest([TRACES / "nsys/nsys-ai/mock.sqlite"], db)
    out = subprocess.run(
        [*CLI, "sql", "--db", str(db), "--format", "json", "SELECT count(*) AS n FROM kernels"],
        capture_output=True,
        text=True,
    )
    assert json.loads(out.stdout) == [{"n": 2}]
    out = subprocess.run(
        [*CLI, "sql", "--db", str(db), "DELETE FROM kernels"], capture_output=True, text=True
    )
    assert out.returncode != 0 and "--write" in out.stderr and "Traceback" not in out.stderr
    out = subprocess.run([*CLI, "sql", "--db", str(db), "SELEC nonsense"], capture_output=True, text=True)
    assert out.returncode != 0 and out.stderr.startswith("error: SQL error") and "Traceback" not in out.stderr


def _hold(db, seconds: float) -> subprocess.Popen:
    """Another process holding the workspace's write lock for `seconds`."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb, time; c = duckdb.connect({str(db)!r}); print('ok', flush=True); "
            f"time.sleep({seconds}); c.close()",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "ok"
    return holder


def test_busy_workspace_is_one_clear_line(tmp_path):
    """A writer that stays past the bounded wait: one line saying it waits, then the error."""
    db = tmp_path / "w.duckdb"
    open_workspace(db).close()
    holder = _hold(db, 30)
    try:
        env = {**os.environ, "NSIGHT_ANALYZE_BUSY_WAIT": "0.5"}
        out = subprocess.run(
            [*CLI, "sql", "--db", str(db), "SELECT 1"], capture_output=True, text=True, env=env
        )
        assert out.returncode == 3
        said = out.stderr.strip().splitlines()
        assert (
            len(said) == 2
            and "waiting up to" in said[0]
            and said[1].startswith("error: ")
            and "busy" in said[1]
        )
    finally:
        holder.kill()


def test_a_command_waits_for_a_writer_that_finishes(tmp_path):
    """A writer that lets go within the wait: the command says it waits once, then answers."""
    db = tmp_path / "w.duckdb"
    open_workspace(db).close()
    holder = _hold(db, 1)
    try:
        out = subprocess.run([*CLI, "sql", "--db", str(db), "--format", "csv", "SELECT 41 + 1 AS n"],
                             capture_output=True, text=True)  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines() == ["n", "42"]
        assert "waiting up to" in out.stderr and "Traceback" not in out.stderr
    finally:
        holder.kill()


def test_missing_workspace_is_one_clear_line(tmp_path):
    out = subprocess.run(
        [*CLI, "info", "--db", str(tmp_path / "none.duckdb")], capture_output=True, text=True
    )
    assert out.returncode != 0 and "no workspace" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("junk", [b"", b"this is not duckdb at all" * 100])
def test_corrupt_workspace_is_one_clear_line(tmp_path, junk):
    db = tmp_path / "w.duckdb"
    db.write_bytes(junk)
    started = time.time()
    out = subprocess.run([*CLI, "info", "--db", str(db)], capture_output=True, text=True)
    assert out.returncode != 0 and "Traceback" not in out.stderr and time.time() - started < 60


@requires_shared
@pytest.mark.parametrize("kind", ["kineto", "parquet"])
def test_a_data_file_given_as_the_workspace_is_refused(tmp_path, kind):
    """DuckDB opens an existing JSON, CSV or Parquet file as an in-memory database with a view of
    it. Before, `ingest DIR --db rank0.pt.trace.json` said "2 file(s) ingested" and saved nothing
    (the file kept its bytes), and `summary --db` it said "Cannot launch in-memory database in
    read-only mode". Now every command refuses it in one line, exit 2, and leaves it as it was."""
    trace_dir = TRACES / "kineto" / "hta" / "trace_filter"
    if kind == "kineto":
        db = tmp_path / "rank0.json"
        with gzip.open(trace_dir / "sampled_rank-0.json.gz") as fh:
            db.write_bytes(fh.read())
    else:
        db = tmp_path / "kernels.parquet"
        duckdb.sql(f"COPY (SELECT 1 AS a) TO '{db}' (FORMAT parquet)")
    before = db.read_bytes()
    for args in (["ingest", str(trace_dir), "-q"], ["summary"], ["sql", "SELECT 1"]):
        out = subprocess.run([*CLI, *args, "--db", str(db)], capture_output=True, text=True)
        assert out.returncode == 2, (args, out.stderr)
        assert out.stderr.strip() == (
            f"error: {db} is not a workspace (not a DuckDB database file; a trace? ingest it): "
            "--db names the workspace, an existing one or a new file name"
        ), args
        assert "ingested" not in out.stdout + out.stderr
    assert db.read_bytes() == before and not list(tmp_path.glob("*.wal"))


def test_a_folder_given_as_the_workspace_is_one_line(tmp_path):
    """`--db FOLDER` (or $NSIGHT_ANALYZE_DB set to one) failed with DuckDB's "IO Error: Could not
    read from file ...: Is a directory"; now one line saying what to name instead, exit 2."""
    env = {**os.environ, "NSIGHT_ANALYZE_DB": str(tmp_path)}
    out = subprocess.run(
        [*CLI, "ingest", str(ROOT / "sample_traces"), "-q"], capture_output=True, text=True, env=env
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == (
        f"error: {tmp_path} is a folder, not a workspace: --db (or $NSIGHT_ANALYZE_DB) names a file, "
        f"e.g. {tmp_path / 'nsight_analyze.duckdb'}"
    )
    assert list(tmp_path.iterdir()) == []


def _limit_of(size: str) -> str:
    """How DuckDB reports a memory_limit of `size` (its own parse and rounding)."""
    con = duckdb.connect()
    con.execute(f"SET memory_limit = '{size}'")
    return con.execute("SELECT current_setting('memory_limit')").fetchone()[0]


def test_analysis_memory_is_capped_and_spills_outside_the_workspace(tmp_path, monkeypatch):
    db = tmp_path / "w.duckdb"
    open_workspace(db).close()
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    con = open_workspace(db, read_only=True)
    threads = int(con.execute("SELECT current_setting('threads')").fetchone()[0])
    assert con.execute("SELECT current_setting('memory_limit')").fetchone()[0] == _limit_of(
        analysis_memory_limit(threads)
    )
    spill = con.execute("SELECT current_setting('temp_directory')").fetchone()[0]
    assert not spill.startswith(str(tmp_path)), "spilling beside a (maybe read-only) workspace"
    con.close()
    monkeypatch.setenv(MEMORY_ENV, "3GB")
    con = open_workspace(db, read_only=True)
    assert con.execute("SELECT current_setting('memory_limit')").fetchone()[0] == _limit_of("3GB")
    con.close()


@pytest.mark.parametrize(
    ("ram_gib", "threads", "expected"),
    [(1024, 4, "4096MiB"), (1024, 1, "1024MiB"), (2, 4, "1024MiB"), (0.25, 2, "256MiB")],
)
def test_default_memory_cap_is_per_thread_and_half_the_machine_at_most(
    monkeypatch, ram_gib, threads, expected
):
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": int(ram_gib * 2**30 / 4096)}
    monkeypatch.setattr(os, "sysconf", lambda name: pages[name])
    assert analysis_memory_limit(threads) == expected
    monkeypatch.setenv(MEMORY_ENV, "12GB")
    assert analysis_memory_limit(threads) == "12GB"


def test_bad_memory_limit_is_one_clear_line(tmp_path):
    db = tmp_path / "w.duckdb"
    open_workspace(db).close()
    out = subprocess.run(
        [*CLI, "info", "--db", str(db)],
        capture_output=True,
        text=True,
        env={**os.environ, MEMORY_ENV: "lots"},
    )
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert out.stderr.strip().count("\n") == 0 and MEMORY_ENV in out.stderr


@pytest.mark.parametrize("value", ["-1GB", "1e3GB", "0GB", "50%", "4 GB RAM", "4000000000"])
def test_memory_limits_duckdb_misreads_are_refused(monkeypatch, value):
    """DuckDB read "-1GB" as no limit at all and "1e3GB" as 1 byte; "0GB" failed every query with
    "ran out of memory under 0GB"."""
    monkeypatch.setenv(MEMORY_ENV, value)
    with pytest.raises(UserError, match=f"{MEMORY_ENV}=.* is not a memory size: give a positive number"):
        analysis_memory_limit(2)


@pytest.mark.parametrize("value", ["8GB", "512MiB", "1.5 gb", "2G", "400000000B"])
def test_memory_limits_in_duckdbs_units_are_taken(tmp_path, monkeypatch, value):
    monkeypatch.setenv(MEMORY_ENV, value)
    db = tmp_path / "w.duckdb"
    open_workspace(db).close()
    con = open_workspace(db, read_only=True)  # DuckDB takes it (bound_memory)
    assert con.execute("SELECT current_setting('memory_limit')").fetchone()[0] == _limit_of(value)
    con.close()


def test_every_canonical_table_is_owned_by_a_rank_or_a_file(tmp_path):
    """Replacing a file deletes what its ranks and the file own (landing.delete_file), and the
    rank-local step shows each batch its ranks' rows: both read ownership from the schema's
    `rank` and `file_id` columns (schema.owned_by), so a table with neither would keep a replaced
    file's rows forever. Expected: the schema files themselves (every table they create)."""
    from nsight_analyze.store import schema

    con = open_workspace(tmp_path / "ws.duckdb", analyse=False)
    try:
        owned = set(schema.owned_by(con, "rank")) | set(schema.owned_by(con, "file_id"))
        assert set(schema.canonical_tables()) - owned == set()
        assert {"kernels", "cuda_api", "nvtx", "ranks"} <= set(schema.owned_by(con, "rank"))
        assert {"env", "ncu_kernels", "ranks"} <= set(schema.owned_by(con, "file_id"))
    finally:
        con.close()


def _catalog(db) -> list:
    """A workspace's objects (name, kind, definition) and its settings and meta rows."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [
            con.execute(
                "SELECT table_name, 'table', sql FROM duckdb_tables() UNION ALL "
                "SELECT view_name, 'view', sql FROM duckdb_views() WHERE NOT internal UNION ALL "
                "SELECT function_name, function_type, macro_definition FROM duckdb_functions() "
                "WHERE NOT internal ORDER BY ALL"
            ).fetchall(),
            con.execute("SELECT * FROM settings ORDER BY key").fetchall(),
            con.execute("SELECT * FROM meta ORDER BY key").fetchall(),
        ]
    finally:
        con.close()


def _without_template(tmp_path, monkeypatch) -> None:
    """Point the cache at a folder that cannot be created: workspaces are then created directly."""
    from nsight_analyze.store import workspace

    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    monkeypatch.setenv(workspace.CACHE_ENV, str(blocked / "cache"))


def test_new_workspace_is_a_copy_of_the_template_with_the_same_catalog(tmp_path, monkeypatch):
    """A new workspace is copied from the one template of this layer and DuckDB version (built on
    first use), and holds what a workspace created statement by statement holds; expected: the
    catalog of one created with the template out of the way (an unwritable cache)."""
    from nsight_analyze.store import workspace

    cache = tmp_path / "cache"
    monkeypatch.setenv(workspace.CACHE_ENV, str(cache))
    cache.mkdir()
    stale = cache / "workspace-0.0.0-0123456789abcdef.duckdb"  # another version's template
    stale.write_bytes(b"old")
    open_workspace(tmp_path / "a.duckdb", analyse=False).close()
    templates = list(cache.glob("workspace-*.duckdb"))
    assert len(templates) == 1 and templates[0] != stale, templates
    built = templates[0].stat().st_mtime_ns
    open_workspace(tmp_path / "b.duckdb", analyse=False).close()
    assert templates[0].stat().st_mtime_ns == built  # built once, then copied
    assert not list(tmp_path.glob(".*.tmp")) and not list(cache.glob(".*"))  # no leftovers
    templates[0].write_bytes(b"\0" * 4096)  # damaged: removed, and the workspace created directly
    open_workspace(tmp_path / "c.duckdb", analyse=False).close()
    assert not templates[0].exists()

    _without_template(tmp_path, monkeypatch)
    open_workspace(tmp_path / "direct.duckdb", analyse=False).close()
    catalogs = [_catalog(tmp_path / f"{name}.duckdb") for name in ("a", "b", "c", "direct")]
    assert catalogs[0][0] and all(c == catalogs[0] for c in catalogs), [len(c[0]) for c in catalogs]


@requires_shared
def test_workspace_from_the_template_ingests_like_one_created_directly(tmp_path, monkeypatch):
    """Expected: the stored results of the same file ingested into a workspace created without
    the template (an unwritable cache)."""
    from conftest import stored_tables

    trace = TRACES / "nsys/nsys-ai/mfu_2gpu_before.sqlite"
    ingest([trace], tmp_path / "copied.duckdb", analyze="all")
    _without_template(tmp_path, monkeypatch)
    ingest([trace], tmp_path / "direct.duckdb", analyze="all")
    tables = []
    for name in ("copied", "direct"):
        con = duckdb.connect(str(tmp_path / f"{name}.duckdb"), read_only=True)
        tables.append(stored_tables(con))
        con.close()
    assert tables[0] == tables[1]
    assert tables[0]["time_partition"]


def test_a_missing_home_is_not_created_for_the_template(tmp_path, monkeypatch):
    """HOME=/nonexistent (service accounts, batch jobs): the template cache used to create that
    folder and its .cache below it. Now there is no template (the workspace is created directly)
    and nothing outside the workspace is made."""
    from nsight_analyze.store import workspace

    home = tmp_path / "nonexistent"
    for var in (workspace.CACHE_ENV, "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    assert workspace.cache_dir() is None
    db = tmp_path / "w.duckdb"
    open_workspace(db).close()
    assert db.is_file() and not home.exists()
    home.mkdir()  # a home that exists holds the cache, as before
    assert workspace.cache_dir() == home / ".cache" / "nsight-analyze"


@requires_shared
def test_a_workspace_in_a_missing_folder_is_one_clear_line(tmp_path):
    """Before: "cannot open workspace ...: IO Error: Cannot open file ...", DuckDB's words."""
    db = tmp_path / "none" / "w.duckdb"
    traces = TRACES / "kineto" / "hta" / "trace_filter"
    out = subprocess.run([*CLI, "ingest", str(traces), "--db", str(db)], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip() == f"error: cannot create workspace {db}: folder {db.parent} does not exist"
    assert not db.parent.exists()


def test_a_bad_busy_wait_is_one_line(tmp_path):
    db = tmp_path / "w.duckdb"
    open_workspace(db).close()
    env = {**os.environ, "NSIGHT_ANALYZE_BUSY_WAIT": "soon"}
    out = subprocess.run([*CLI, "sql", "--db", str(db), "SELECT 1"], capture_output=True, text=True, env=env)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "error: NSIGHT_ANALYZE_BUSY_WAIT='soon' is not a number of seconds (e.g. 60; 0: do not wait)"
    ]
