"""The declared query layer and the stored analysis: declarations, documentation, staleness, kills.

Expected values come from the query files themselves (their headers), DuckDB's DESCRIBE, and
the workspace's own bookkeeping (`meta`, `_analysis_ranks`).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import duckdb
import pytest
from conftest import copy_workspace, stored_tables

from nsight_analyze import analysis
from nsight_analyze.errors import UserError
from nsight_analyze.ingest.run import ingest
from nsight_analyze.sources import kineto, nsys_sqlite, registry
from nsight_analyze.store import query_layer, schema
from nsight_analyze.store.workspace import open_workspace

ROOT = query_layer.queries_dir().parent


def _code(q: query_layer.Query) -> str:
    return re.sub(r"--[^\n]*", "", q.sql)


def test_requires_declares_every_query_it_reads():
    """A query's `-- requires:` names every other query its SQL mentions (so the order is right)."""
    names = {q.name for q in query_layer.layer()}
    for q in query_layer.layer():
        used = {n for n in names - {q.name} if re.search(rf"(?<![\w.]){n}(?!\w)", _code(q))}
        assert used <= set(q.requires), f"{q.name}.sql reads {sorted(used - set(q.requires))} undeclared"
        assert q.stage in query_layer.STAGES and q.result in query_layer.RESULTS


def test_load_order_follows_declarations():
    order = [q.name for q in query_layer.layer()]
    for q in query_layer.layer():
        for dep in q.requires:
            if dep in order:
                assert order.index(dep) < order.index(q.name), (dep, q.name)


def _stage_queries(stage: str) -> list[query_layer.Query]:
    queries = query_layer.closure(query_layer.of_stage(stage))
    return queries if stage == "rank" else [q for q in queries if q.stage != "rank"]


@pytest.mark.parametrize("stage", ["rank", "job"])
def test_a_step_table_is_dropped_only_after_everything_that_reads_it(stage):
    """No query after a step table's last reader (analysis.last_readers) reads it, directly or
    through the views it binds; the big step tables of the rank step are dropped early at all."""
    queries = _stage_queries(stage)
    by_name = {q.name: q for q in queries}

    def reads(q: query_layer.Query) -> set[str]:  # what binding q touches: through views, not tables
        out: set[str] = set()
        for dep in q.requires:
            if dep in by_name:
                out.add(dep)
                if by_name[dep].result == "view" or by_name[dep].stage == "live":
                    out |= reads(by_name[dep])
        return out

    last = analysis.last_readers(queries)
    for name, at in last.items():
        assert name in reads(queries[at]), f"{queries[at].name} is not a reader of {name}"
        late = [q.name for q in queries[at + 1 :] if name in reads(q)]
        assert not late, f"{name} is dropped after {queries[at].name}, but {late} read it later"
    if stage == "rank":
        assert {"_kernel_windows", "_tp_segments", "_op_launches"} <= set(last)


def test_a_view_nothing_reads_keeps_its_tables():
    """A view no query of the stage reads is the caller's: the step tables it reads are kept."""

    def q(name: str, result: str, *requires: str) -> query_layer.Query:
        return query_layer.Query(name, "view", "rank", result, requires, "")

    layer = [
        q("t", "step"),
        q("u", "step"),
        q("v", "view", "t"),
        q("a", "stored", "t", "u"),
        q("b", "stored"),
    ]
    assert analysis.last_readers(layer) == {"u": 3}


def test_rank_results_are_per_rank_and_private_names_stay_out(tmp_path):
    con = open_workspace(tmp_path / "w.duckdb")
    for name in query_layer.stored("rank"):
        cols = [r[0] for r in con.execute(f"DESCRIBE {name}").fetchall()]
        assert cols[0] == "rank" or "rank" in cols, f"rank-local result {name} has no rank column"
    public = {q.name for q in query_layer.layer() if not q.private}
    assert all(not n.startswith("_") for n in public)


def test_every_public_table_documents_its_columns(sample_workspace):
    """The `-- columns:` line of each public view/table equals what DESCRIBE says."""
    con = open_workspace(sample_workspace, read_only=True)
    for q in query_layer.layer():
        if q.private or q.kind != "view":
            continue
        line = re.search(r"^-- columns: (.*)$", q.sql, re.MULTILINE)
        assert line, f"{q.name}.sql has no -- columns: line"
        documented = [c.strip() for c in line.group(1).split(",")]
        assert documented == [r[0] for r in con.execute(f"DESCRIBE {q.name}").fetchall()], q.name


def test_no_connection_runs_an_asof_join_as_a_nested_loop(sample_workspace):
    """Every connection we open turns DuckDB's ASOF loop join off (duck.offline says why).

    DuckDB plans an ASOF join whose probe side it estimates at <= 64 rows as a nested loop,
    and the rank-local queries read shadowed tables with estimates that small: the analysis of
    the 2.5 MB nsys-ai mfu_2gpu_before capture took 4.0 s with it, 1.9 s without (2 idle cores)
    (`benchmarks/profile_analysis.py W --set asof_loop_join_threshold=64`). The setting is
    per connection: the workspace's (read-only and not) and one through duck.offline, which
    every other connection (workers', the Kineto parser's, compare's) is opened with.
    """
    from nsight_analyze.store import duck

    def threshold(con: duckdb.DuckDBPyConnection) -> str:
        return con.execute("SELECT current_setting('asof_loop_join_threshold')").fetchone()[0]

    assert threshold(duckdb.connect()) == 64  # DuckDB's default, which the check below must change
    for read_only in (True, False):
        con = open_workspace(sample_workspace, read_only=read_only)
        assert threshold(con) == 0
        con.close()
    assert threshold(duck.offline(duckdb.connect())) == 0


def test_recompute_in_a_workspace_whose_name_needs_quoting(sample_workspace, tmp_path):
    """The rank results are written into the staged tables by qualified name (analysis.Staging):
    a file name with a quote, a backslash-digit (a regex back-reference if pasted unquoted into a
    replacement) and a space recomputes to the same tables as the sample workspace holds."""
    db = copy_workspace(sample_workspace, tmp_path / "it's a \\1 job.duckdb")
    want = open_workspace(sample_workspace, read_only=True)
    expected = stored_tables(want)
    want.close()
    con = open_workspace(db)
    analysis.refresh(con, force=True)
    assert stored_tables(con) == expected
    con.close()


def test_registry_suffixes_equal_the_readers():
    """The registry decides without importing the readers: its suffixes must be theirs."""
    assert registry.KINETO_SUFFIXES == kineto.SUFFIXES
    assert registry.NSYS_SUFFIXES == nsys_sqlite.SUFFIXES


def test_help_imports_no_heavy_module():
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "nsight_analyze", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0
    imported = {line.split("|")[-1].strip() for line in out.stderr.splitlines()}
    assert not imported & {"duckdb", "pandas", "plotly", "pyarrow"}
    from nsight_analyze.commands import SHORT_HELP

    modules = {p.stem for p in (ROOT / "nsight_analyze" / "commands").glob("*.py") if p.stem != "__init__"}
    assert set(SHORT_HELP) == modules


def _stamps(db) -> tuple:
    con = duckdb.connect(str(db), read_only=True)
    try:
        meta = dict(con.execute("SELECT key, value FROM meta WHERE key LIKE 'analysis_%'").fetchall())
        ranks = dict(con.execute("SELECT rank, fingerprint FROM _analysis_ranks").fetchall())
        return meta, ranks
    finally:
        con.close()


@pytest.fixture
def sample_db(tmp_path):
    db = tmp_path / "w.duckdb"
    traces = tmp_path / "traces"
    traces.mkdir()
    for f in sorted((ROOT / "sample_traces").glob("*.sqlite"))[:2]:
        (traces / f.name).write_bytes(f.read_bytes())
    ingest([traces], db)
    return db, traces


def test_recompute_only_when_something_changed(sample_db):
    db, traces = sample_db
    before = _stamps(db)
    assert len(before[1]) == 2  # two ranks, each stamped by the ingest that computed them
    open_workspace(db, read_only=True, needs=None).close()
    assert _stamps(db) == before  # reading the first answers (what ingest computed) recomputes nothing
    open_workspace(db, read_only=True).close()  # the rest is computed once, on its first read
    held = _stamps(db)
    assert held[1] == before[1]
    assert {k: v for k, v in held[0].items() if k != "analysis_tables"} == {
        k: v for k, v in before[0].items() if k != "analysis_tables"
    }
    open_workspace(db, read_only=True).close()
    assert _stamps(db) == held  # and never again
    # a setting: everything is stale, the next command recomputes once
    con = open_workspace(db, analyse=False)
    con.execute("UPDATE settings SET value = '^never_matches$' WHERE key = 'step_pattern'")
    con.close()
    assert analysis.plan(duckdb.connect(str(db), read_only=True)).full
    con = open_workspace(db, read_only=True)
    assert con.execute("SELECT DISTINCT source FROM steps").fetchall() != [("nvtx",)]
    con.close()
    after_setting = _stamps(db)
    assert after_setting[0]["analysis_global"] != before[0]["analysis_global"]
    # a new file: only its rank is computed, the others keep their stamps
    third = sorted((ROOT / "sample_traces").glob("*.sqlite"))[2]
    (traces / third.name).write_bytes(third.read_bytes())
    con = open_workspace(db, analyse=False)
    assert analysis.plan(con).ranks == []  # nothing stale before the file is ingested
    con.close()
    report = ingest([traces], db)
    assert len(report.by_status("ok")) == 1
    meta, ranks = _stamps(db)
    assert len(ranks) == 3 and {r: ranks[r] for r in after_setting[1]} == after_setting[1]
    assert meta["analysis_job"] != after_setting[0]["analysis_job"]


def _stored_after_both(db) -> tuple[dict, dict]:
    """Every stored table after the refresh the workspace's state asks for, then after a full
    recompute (the expected values: the same inputs computed all at once)."""
    con = open_workspace(db, analyse=False)
    try:
        analysis.refresh(con)
        partial = stored_tables(con)
        analysis.refresh(con, force=True)
        return partial, stored_tables(con)
    finally:
        con.close()


def test_a_partial_recompute_equals_a_full_one(sample_db):
    """Only the stale ranks' rows are staged and swapped in (Plan.kept): a new file (its rank
    computed, two kept), a rank's rows changed with SQL, a rank removed and a job-only change
    each leave every stored table as a recompute of everything leaves it."""
    db, traces = sample_db
    open_workspace(db).close()  # every stored result held: each is recomputed for the stale ranks only
    third = sorted((ROOT / "sample_traces").glob("*.sqlite"))[2]
    (traces / third.name).write_bytes(third.read_bytes())
    con = open_workspace(db, analyse=False)
    ranks = [r for (r,) in con.execute("SELECT rank FROM ranks ORDER BY rank").fetchall()]
    con.close()
    ingest([traces], db)  # computes the new rank while loading, keeps the two others
    partial, full = _stored_after_both(db)
    assert partial == full and len({r[0] for r in full["time_partition"]}) == 3

    con = open_workspace(db, analyse=False)
    changed, removed = ranks
    con.execute("DELETE FROM cuda_api WHERE rank = ? AND correlation_id % 2 = 0", [changed])
    for table in schema.owned_by(con, "rank"):
        con.execute(f'DELETE FROM "{table}" WHERE rank = ?', [removed])
    con.execute("DELETE FROM ranks WHERE rank = ?", [removed])
    p = analysis.plan(con)
    assert (p.ranks, p.removed, len(p.kept)) == ([changed], [removed], 1)
    con.close()
    partial, full = _stored_after_both(db)
    assert partial == full
    assert removed not in {row[0] for row in full["time_partition"]}

    con = open_workspace(db, analyse=False)
    con.execute("DELETE FROM meta WHERE key = 'analysis_job'")  # only the job step is stale
    p = analysis.plan(con)
    assert p.job and not p.ranks and not p.removed and len(p.kept) == 2
    con.close()
    partial, full = _stored_after_both(db)
    assert partial == full


def test_rows_changed_by_sql_make_their_rank_stale(sample_db):
    """A rank's rows deleted with SQL: the totals change, only that rank is stale. With nothing
    changed, the fingerprints read from the last analysis equal a full count per rank."""
    db, _ = sample_db
    con = open_workspace(db, analyse=False)
    unchanged = analysis.plan(con)
    assert not unchanged.needed
    con.execute("UPDATE meta SET value = 'x' WHERE key = 'analysis_totals'")  # forces the count
    counted = analysis.plan(con)
    assert counted.fingerprints == unchanged.fingerprints and counted.sizes == unchanged.sizes
    con.execute(
        "UPDATE meta SET value = ? WHERE key = 'analysis_totals'", [unchanged.stamps["analysis_totals"]]
    )
    rank = min(unchanged.fingerprints)
    con.execute("DELETE FROM cuda_api WHERE rank = ? AND correlation_id % 2 = 0", [rank])
    stale = analysis.plan(con)
    assert stale.ranks == [rank] and not stale.full
    assert stale.sizes[rank] < unchanged.sizes[rank]
    con.close()


def test_kill_during_analysis_leaves_previous_results(sample_db):
    """SIGKILL in the middle of a recompute: the workspace still has the previous results, whole."""
    db, _ = sample_db
    con = duckdb.connect(str(db), read_only=True)
    want = con.execute("SELECT * FROM time_partition ORDER BY ALL").fetchall()
    con.close()
    marker = db.parent / "computing"
    script = f"""
import time
from nsight_analyze import analysis
from nsight_analyze.store.workspace import open_workspace
con = open_workspace({str(db)!r}, analyse=False)
real = analysis.job_step
def slow_job_step(*a, **k):
    out = real(*a, **k)
    open({str(marker)!r}, "w").close()  # every rank's new results are staged: kill now
    time.sleep(60)
    return out
analysis.job_step = slow_job_step
analysis.refresh(con, force=True)
"""
    proc = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.monotonic() + 120
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), "the analysis never reached the point where it writes results"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL  # it was killed mid-analysis, not finished
    con = open_workspace(db, read_only=True)
    assert con.execute("SELECT * FROM time_partition ORDER BY ALL").fetchall() == want
    con.close()
    con = open_workspace(db)
    analysis.refresh(con, force=True)  # the next recompute clears what the killed one staged
    tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert not [t for t in tables if t.startswith("_staged_")]
    assert con.execute("SELECT * FROM time_partition ORDER BY ALL").fetchall() == want


def test_recompute_holds_checkpoints_until_it_has_swapped(sample_db, monkeypatch):
    """No automatic checkpoint while the staged results are written (duck.checkpoints_held: each
    rewrote the staged tables' partly filled row groups); the database's own threshold is back
    after the recompute, and after one that failed."""
    db, _ = sample_db
    con = open_workspace(db)
    setting = "SELECT current_setting('checkpoint_threshold')"
    before = con.execute(setting).fetchone()[0]
    seen = []
    real = analysis.job_step

    def spy(c, *args, **kwargs):  # the job step runs after every rank's results are staged
        seen.append(c.execute(setting).fetchone()[0])
        return real(c, *args, **kwargs)

    monkeypatch.setattr(analysis, "job_step", spy)
    analysis.refresh(con, force=True)
    assert before == "16.0 MiB"  # DuckDB's default (its documentation: 16 MiB)
    assert seen == ["1.0 GiB"]  # duck.HELD_CHECKPOINT_THRESHOLD, as DuckDB prints it
    assert con.execute(setting).fetchone()[0] == before

    def broken(*args, **kwargs):
        raise RuntimeError("job step failed")

    monkeypatch.setattr(analysis, "job_step", broken)
    with pytest.raises(RuntimeError, match="job step failed"):
        analysis.refresh(con, force=True)
    assert con.execute(setting).fetchone()[0] == before
    con.close()


@pytest.mark.parametrize("streams", [32768, 1])
def test_sweep_counter_limit_is_guarded(tmp_path, streams):
    """32,768 overlapping compute kernels exceed the sweep's 15-bit counter: a clear error, no answer."""
    con = open_workspace(tmp_path / "w.duckdb")
    con.execute(
        "INSERT INTO kernels (rank, stream_id, start_ns, end_ns, name, correlation_id, category) "
        "SELECT 0, i % ?, i, 1000000 + i, 'gemm', i, 'compute' FROM range(32768) t(i)",
        [streams],
    )
    with pytest.raises(UserError, match="more than 32,767 compute operations running at once"):
        analysis.refresh(con, force=True)
    con.execute("DELETE FROM kernels WHERE correlation_id = 0")  # one fewer: exact again
    analysis.refresh(con, force=True)
    compute = con.execute("SELECT compute_ns FROM time_partition WHERE step IS NULL").fetchone()[0]
    assert compute == 1_000_000 + 32766  # kernels 1..32767 cover [1, 1_000_000 + 32767)


def test_many_kernels_without_overlap_pass_the_guard(tmp_path):
    """40,000 back-to-back kernels on one stream: far more than 32,767, but never two at once."""
    con = open_workspace(tmp_path / "w.duckdb")
    con.execute(
        "INSERT INTO kernels (rank, stream_id, start_ns, end_ns, name, correlation_id, category) "
        "SELECT 0, 7, 10 * i, 10 * i + 5, 'gemm', i, 'compute' FROM range(40000) t(i)"
    )
    analysis.refresh(con, force=True)
    assert con.execute("SELECT compute_ns FROM time_partition WHERE step IS NULL").fetchone()[0] == 40000 * 5


def test_out_of_memory_is_one_line_naming_the_query_and_the_cap(tmp_path, monkeypatch, sample_workspace):
    """A cap far too small for the analysis: one line naming the query and NSIGHT_ANALYZE_MEMORY_LIMIT."""
    db = copy_workspace(sample_workspace, tmp_path / "w.duckdb")
    con = open_workspace(db, analyse=False)
    monkeypatch.setenv("NSIGHT_ANALYZE_MEMORY_LIMIT", "2MB")  # refresh applies the cap again
    with pytest.raises(UserError, match=r"^computing \w+ ran out of memory under 2MB: set NSIGHT_ANALYZE_"):
        analysis.refresh(con, force=True)
    monkeypatch.delenv("NSIGHT_ANALYZE_MEMORY_LIMIT")
    con.close()
    con = open_workspace(db, read_only=True)  # the failed recompute left the previous results
    assert con.execute("SELECT count(*) FROM time_partition").fetchone()[0] > 0


def test_out_of_memory_outside_the_analysis_is_one_line_too(tmp_path, sample_workspace):
    """A read that runs out of memory where no step names itself (summary's queries under a 1 MB
    cap) is the same one line naming the command and the variable (exit 2), not DuckDB's
    'OutOfMemoryException: ... (set NSIGHT_ANALYZE_DEBUG=1)' with exit 1."""
    from click.testing import CliRunner

    from nsight_analyze.cli import main

    db = copy_workspace(sample_workspace, tmp_path / "w.duckdb")
    res = CliRunner().invoke(main, ["summary", "--db", str(db)], env={"NSIGHT_ANALYZE_MEMORY_LIMIT": "1MB"})
    assert res.exit_code == 2, res.output
    assert res.stderr.strip().splitlines() == [
        "error: `summary` ran out of memory under 1MB: set NSIGHT_ANALYZE_MEMORY_LIMIT higher (e.g. "
        "NSIGHT_ANALYZE_MEMORY_LIMIT=8GB) or free memory, then run the command again"
    ]


def test_classify_rules_make_the_analysis_stale(sample_db, tmp_path):
    """`classify --rules` that turns every GEMM into memory work: the next command recomputes and
    the partition moves the GEMM time out of compute (expected: compute_ns falls to the time of
    the remaining compute kernels, which the kernels table gives)."""
    from click.testing import CliRunner

    from nsight_analyze.cli import main

    db, _ = sample_db
    rules = tmp_path / "rules.csv"
    rules.write_text(
        "priority,pattern,category,subcategory,note\n1,(?i)gemm|nvjet|xmma,memory,elementwise,test\n"
    )
    before = _stamps(db)
    con = duckdb.connect(str(db), read_only=True)
    compute_before = con.execute("SELECT sum(compute_ns) FROM time_partition WHERE step IS NULL").fetchone()[
        0
    ]
    con.close()
    out = CliRunner().invoke(main, ["classify", "--db", str(db), "--rules", str(rules), "--format", "json"])
    assert out.exit_code == 0, out.output
    open_workspace(db, read_only=True).close()  # the next command recomputes
    assert _stamps(db)[0]["analysis_global"] != before[0]["analysis_global"]
    con = open_workspace(db, read_only=True)
    gemm = con.execute(
        "SELECT count(*) FROM kernels "
        "WHERE regexp_matches(name, '(?i)gemm|nvjet|xmma') AND category <> 'memory'"
    ).fetchone()[0]
    assert gemm == 0
    compute = con.execute("SELECT sum(compute_ns) FROM time_partition WHERE step IS NULL").fetchone()[0]
    union = con.execute(
        "SELECT sum(n) FROM (SELECT rank, sum(end_ns - start_ns) AS n FROM kernels "
        "WHERE category = 'compute' GROUP BY rank)"
    ).fetchone()[0]
    assert compute <= (union or 0) < compute_before  # at most the remaining compute kernels' time
