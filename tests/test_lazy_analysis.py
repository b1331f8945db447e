"""Answer first: an ingest computes the first answers; every other stored result is computed the
first time something reads it, once, and equals what an eager computation stores (issue 53).

The oracle of every comparison here is the eager path (`ingest --analyze all`), itself checked
against nsys stats, HTA, TraceLens and the generator's truth by the rest of the suite."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from conftest import ROOT, TRACES, copy_workspace, nsys_traces, requires_shared, rounded_select
from test_statements import module_of, statement_files

from nsight_analyze import analysis
from nsight_analyze.ingest.run import ingest
from nsight_analyze.store import query_layer
from nsight_analyze.store.workspace import open_workspace
from nsight_analyze.whatif import READS as WHATIF_READS

CLI = [sys.executable, "-m", "nsight_analyze"]


def held(db: Path) -> set[str]:
    """The stored results the workspace holds under its stamps, and the check that each exists
    as a table and no other stored result does (a stale one is dropped, not left readable)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        names = analysis.computed(con)
        tables = {
            r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE NOT temporary").fetchall()
        }
    finally:
        con.close()
    assert tables & analysis.all_stored() == names
    return names


def rows(db: Path, names, skip: tuple[str, ...] = ()) -> dict[str, list]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {
            n: sorted(con.execute(rounded_select(con, n, skip)).fetchall(), key=repr) for n in sorted(names)
        }
    finally:
        con.close()


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=600,
    )


@pytest.fixture(scope="module")
def sample_pair(tmp_path_factory) -> tuple[Path, Path]:
    """The bundled sample ingested lazily (the default) and eagerly (--analyze all)."""
    folder = tmp_path_factory.mktemp("lazy")
    lazy, eager = folder / "lazy.duckdb", folder / "eager.duckdb"
    ingest([ROOT / "sample_traces"], lazy)
    ingest([ROOT / "sample_traces"], eager, analyze="all")
    return lazy, eager


def test_ingest_computes_the_first_answers_only(sample_pair):
    lazy, eager = sample_pair
    assert held(lazy) == analysis.targets(None)
    assert held(lazy) < analysis.all_stored()  # the point: not all 65 tables up front
    assert held(eager) == analysis.all_stored()


def test_each_table_on_demand_equals_the_eager_one(sample_pair, tmp_path):
    """Every stored result, computed alone from the first answers, equals the eager table."""
    lazy, eager = sample_pair
    expected = rows(eager, analysis.all_stored())
    for name in sorted(analysis.all_stored() - analysis.targets(None)):
        db = copy_workspace(lazy, tmp_path / f"{name}.duckdb")
        open_workspace(db, needs=[name]).close()
        assert held(db) == analysis.targets([name]), name  # its closure, nothing more
        got = rows(db, analysis.targets([name]))
        assert got == {n: expected[n] for n in got}, name


def test_a_command_computes_its_closure_once(sample_pair, tmp_path):
    db = copy_workspace(sample_pair[0], tmp_path / "w.duckdb")
    first = held(db)
    out = cli("summary", "--db", str(db))
    assert out.returncode == 0, out.stderr
    assert "analysis" not in out.stderr and held(db) == first  # summary is a first answer
    out = cli("whatif", "--db", str(db), "--format", "json")
    assert out.returncode == 0, out.stderr
    assert "analysis: computing" in out.stderr and "first use" in out.stderr
    assert held(db) == analysis.targets(WHATIF_READS)
    again = cli("whatif", "--db", str(db), "--format", "json")
    assert again.stderr == "" and again.stdout == out.stdout  # computed nothing, same answer
    out = cli("ranks", "--db", str(db))  # the ranks report reads the what-if: nothing to compute
    assert out.returncode == 0 and out.stderr == "" and held(db) == analysis.targets(WHATIF_READS)


def test_sql_computes_the_tables_it_names(sample_pair, tmp_path):
    db = copy_workspace(sample_pair[0], tmp_path / "w.duckdb")
    out = cli("sql", "--db", str(db), "--format", "csv", "SELECT count(*) AS n FROM kernel_chains")
    assert out.returncode == 0, out.stderr
    assert held(db) == analysis.targets(["kernel_chains"])
    eager = rows(sample_pair[1], ["kernel_chains"])["kernel_chains"]
    assert out.stdout.splitlines() == ["n", str(len(eager))]


def test_outputs_equal_eager_ones(sample_pair, tmp_path):
    """Every JSON document is the same whether its tables were computed at ingest or on demand."""
    lazy = copy_workspace(sample_pair[0], tmp_path / "lazy.duckdb")
    for command in (["summary"], ["ranks"], ["whatif"], ["comms"], ["diagnose"], ["mfu"]):
        got = cli(*command, "--db", str(lazy), "--format", "json")
        want = cli(*command, "--db", str(sample_pair[1]), "--format", "json")
        assert got.returncode == want.returncode == 0, (command, got.stderr)
        assert got.stdout == want.stdout, command


def test_stale_tables_are_dropped_and_recomputed_on_their_next_read(sample_pair, tmp_path):
    db = copy_workspace(sample_pair[0], tmp_path / "w.duckdb")
    open_workspace(db, needs="all").close()
    assert held(db) == analysis.all_stored()
    # a setting change: the first answers are recomputed at once, the rest on their next read
    out = cli("summary", "--db", str(db), "--no-periodic-steps")
    assert out.returncode == 0, out.stderr
    assert held(db) == analysis.targets(None)
    open_workspace(db, needs=["gaps"]).close()
    assert held(db) == analysis.targets(["gaps"])


def test_a_new_file_recomputes_its_ranks_of_every_held_table(tmp_path):
    """A re-ingest with one more rank: every table held stays held (recomputed for the new rank
    only) and equals an eager ingest of all the files."""
    from nsight_analyze.synth import generate

    folder = tmp_path / "traces"
    generate(folder, ranks=3, steps=3, kernels_per_step=30, seed=7)
    later = sorted(folder.glob("*.sqlite"))[-1]
    aside = tmp_path / later.name
    later.rename(aside)
    db = tmp_path / "w.duckdb"
    ingest([folder], db)
    open_workspace(db, needs=["gaps", "kernel_chains"]).close()
    before = held(db)
    aside.rename(later)
    ingest([folder], db)
    assert held(db) == before
    eager = tmp_path / "eager.duckdb"
    ingest([folder], eager, analyze="all")
    # file ids follow the order the files came in (the eager ingest read them all at once)
    assert rows(db, before, skip=("file_id",)) == rows(eager, before, skip=("file_id",))


def test_sigkill_while_computing_on_demand_leaves_the_previous_results(sample_pair, tmp_path):
    db = copy_workspace(sample_pair[0], tmp_path / "w.duckdb")
    first = rows(db, held(db))
    proc = subprocess.Popen([*CLI, "diagnose", "--db", str(db)], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()  # "analysis: computing ..." comes before the work
    assert "analysis: computing" in line
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    from nsight_analyze.diagnose import READS

    have = held(db)  # either the first answers alone or everything diagnose reads, never half
    assert have in (analysis.targets(None), analysis.targets(READS))
    assert {n: v for n, v in rows(db, have).items() if n in first} == first
    out = cli("diagnose", "--db", str(db), "--format", "json")
    want = cli("diagnose", "--db", str(sample_pair[1]), "--format", "json")
    assert out.returncode == 0 and out.stdout == want.stdout


def test_two_commands_at_once_both_answer(sample_pair, tmp_path):
    db = copy_workspace(sample_pair[0], tmp_path / "w.duckdb")
    procs = [
        subprocess.Popen(
            [*CLI, command, "--db", str(db), "--format", "json"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for command in ("diagnose", "whatif")
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    for proc, (stdout, stderr) in zip(procs, outs):
        assert proc.returncode == 0, stderr
        assert "Traceback" not in stderr
        assert stdout.startswith("{")
    from nsight_analyze.diagnose import READS

    assert held(db) == analysis.targets([*READS, *WHATIF_READS])


def test_analyze_option_names_tables(tmp_path):
    db = tmp_path / "w.duckdb"
    bad = cli("ingest", str(ROOT / "sample_traces"), "--db", str(db), "--analyze", "no_such_table")
    assert bad.returncode == 2 and "no table named no_such_table" in bad.stderr
    assert not db.exists()  # said before anything was read
    ok = cli("ingest", str(ROOT / "sample_traces"), "--db", str(db), "-q", "--analyze", "gaps,kernel_chains")
    assert ok.returncode == 0, ok.stderr
    assert held(db) == analysis.targets(["gaps", "kernel_chains"])


def _shared_traces() -> list:
    if not TRACES.is_dir():
        return []
    files = [*nsys_traces(), *sorted((TRACES / "kineto").rglob("*.json*"))]
    return [pytest.param(f, id=str(f.relative_to(TRACES))) for f in files]


@requires_shared
@pytest.mark.slow
@pytest.mark.parametrize("trace", _shared_traces())
def test_on_demand_equals_eager_on_every_shared_trace(trace: Path, tmp_path):
    """Every stored result computed on demand (the first answers at ingest, the rest on a read)
    equals the same result computed in one eager pass, on every shared trace."""
    lazy, eager = tmp_path / "lazy.duckdb", tmp_path / "eager.duckdb"
    try:
        ingest([trace], lazy)
    except Exception as exc:  # noqa: BLE001 - a trace our ingest refuses has nothing to compare
        pytest.skip(f"not ingestible alone: {exc}")
    if not lazy.exists():  # not a trace (a metadata file beside one): nothing was loaded
        pytest.skip(f"{trace.name} holds no trace events")
    copy_workspace(lazy, eager)
    con = open_workspace(eager, analyse=False)
    try:
        analysis.refresh(con, force=True, wanted="all")
    finally:
        con.close()
    open_workspace(lazy, needs="all").close()
    assert held(lazy) == held(eager) == analysis.all_stored()
    assert rows(lazy, analysis.all_stored()) == rows(eager, analysis.all_stored())


def test_query_names_in_user_sql():
    names = query_layer.names_in("select * from GAPS g join kernel_chains using (rank) -- steps")
    assert {"gaps", "kernel_chains", "steps"} <= names
    assert "kernels" not in names  # a canonical table: nothing to compute


@pytest.mark.parametrize(
    "module, sources",
    [
        # the modules whose SQL a reader runs (each with its statement file, when it has one)
        ("diagnose", ["nsight_analyze/diagnose.py", "nsight_analyze/rules/*.py"]),
        ("whatif", ["nsight_analyze/whatif.py"]),
        ("comms", ["nsight_analyze/comms.py"]),
        ("mfu", [f"nsight_analyze/mfu/{m}.py" for m in ("__init__", "rows", "dcgm", "flops")]),
        ("runs", ["nsight_analyze/runs/__init__.py"]),
        ("export.chrome_trace", ["nsight_analyze/export/chrome_trace.py"]),
        ("report_doc", ["nsight_analyze/report_doc/*.py"]),
    ],
)
def test_declared_reads_cover_what_the_sources_name(module: str, sources: list[str]):
    """A reader's READS (what it asks refresh to compute) covers every result its SQL names: a
    rule that reads a new table fails here until it is declared, not on a user's workspace."""
    import importlib

    declared = importlib.import_module(f"nsight_analyze.{module}").READS
    statement_file_of = {module_of(p).resolve(): p for p in statement_files()}  # test_statements' map
    named: set[str] = set()
    for pattern in sources:
        paths = list(ROOT.glob(pattern))
        assert paths, f"{pattern} matches no file"
        for path in paths:
            named |= query_layer.names_in(path.read_text())
            statement_file = statement_file_of.get(path.resolve())
            if statement_file:
                named |= query_layer.names_in(statement_file.read_text())
    missing = analysis.targets(named) - analysis.targets(declared)
    assert not missing, f"{module}.READS lacks {sorted(missing)}"


def test_a_job_of_a_workspace_computed_for_the_session_is_scoped(tmp_path):
    """Another process holds the file open, so `diagnose --job N` computes what it reads for its
    own session (TEMP tables no stored table shadows yet); the job scope must still show job N
    alone. Oracle: the same command once the file is free (computed and stored)."""
    from nsight_analyze.synth import generate

    db = tmp_path / "w.duckdb"
    for seed, inject in ((1, ()), (2, ("straggler=1:+50",))):
        generate(tmp_path / f"job{seed}", ranks=2, steps=4, kernels_per_step=20, seed=seed, injections=inject)
        ingest([tmp_path / f"job{seed}"], db)
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import duckdb, time; c = duckdb.connect({str(db)!r}, read_only=True); "
         "print('ok', flush=True); time.sleep(120)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "ok"
        busy = [
            cli(
                "diagnose",
                "--db",
                str(db),
                "--job",
                str(j),
                "--format",
                "json",
                env={"NSIGHT_ANALYZE_BUSY_WAIT": "0"},
            )
            for j in (1, 2)
        ]
    finally:
        holder.kill()
        holder.wait()
    assert all("computing it for this command only" in out.stderr for out in busy)
    stored = [cli("diagnose", "--db", str(db), "--job", str(j), "--format", "json") for j in (1, 2)]
    assert [out.stdout for out in busy] == [out.stdout for out in stored]
    assert busy[0].stdout != busy[1].stdout  # two different jobs: a comparison that can fail


def test_many_runs_answers_are_what_runs_reads_beyond_the_first():
    """An ingest that leaves several runs computes what `runs` reads (MANY_RUNS_ANSWERS), so the
    first `runs` computes nothing: the two lists must agree (runs.READS is the reader's own)."""
    from nsight_analyze import runs
    from nsight_analyze.analysis import FIRST_ANSWERS, MANY_RUNS_ANSWERS

    assert set(runs.READS) - set(FIRST_ANSWERS) == set(MANY_RUNS_ANSWERS)
