"""Shared test fixtures: where the real traces and oracles live, and quick ingest helpers."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
TRACES = SHARED / "traces"
ORACLES = TRACES / "oracles" / "nsys-2022.4"

# The empty-workspace template (workspace._template) of this test run, not the user's cache; set
# at import so that the CLI subprocesses the tests start inherit it.
os.environ["NSIGHT_ANALYZE_CACHE_DIR"] = tempfile.mkdtemp(prefix="nsight_analyze_test_cache_")
atexit.register(shutil.rmtree, os.environ["NSIGHT_ANALYZE_CACHE_DIR"], ignore_errors=True)

requires_shared = pytest.mark.skipif(
    not TRACES.is_dir(), reason="../shared/traces is absent (real traces live beside the project)"
)


def nsys_traces() -> list[Path]:
    """Every real nsys SQLite export in ../shared/traces/nsys, or [] when absent."""
    return sorted((TRACES / "nsys").rglob("*.sqlite")) if TRACES.is_dir() else []


def rounded_select(con, table: str, skip: Collection[str] = ()) -> str:
    """SELECT of a table's columns (all but `skip`), floating-point ones as text to 10 significant
    digits: a sum's last bits depend on the order DuckDB's threads add in, so two computations of
    the same table are "identical" only so rounded (test_scale, test_partition)."""
    cols = [c[:2] for c in con.execute(f'DESCRIBE "{table}"').fetchall() if c[0] not in skip]
    exprs = [f'printf(\'%.10g\', "{c}") AS "{c}"' if t in ("DOUBLE", "FLOAT") else f'"{c}"' for c, t in cols]
    return f'SELECT {", ".join(exprs)} FROM "{table}"'


def stored_tables(con) -> dict[str, list]:
    """Every stored result table, rows sorted (the tables are sets of rows), floats rounded
    (rounded_select)."""
    from nsight_analyze.store import query_layer

    names = [*query_layer.stored("rank"), *query_layer.stored("job")]
    return {n: sorted(con.execute(rounded_select(con, n)).fetchall(), key=repr) for n in names}


def frame_rows(df, limit: int) -> list[dict]:
    """The first `limit` rows of a DataFrame as JSON data: the oracle of a finding's evidence rows,
    which diagnose reads as plain rows (`.df()` is the independent path)."""
    from nsight_analyze.plain import jsonable

    return [
        {str(k): jsonable(v) for k, v in r.items()} for r in df.head(limit).astype(object).to_dict("records")
    ]


def oracle_dir(trace: Path) -> Path:
    """traces/nsys/a/b.sqlite -> oracles/nsys-2022.4/a__b"""
    rel = trace.relative_to(TRACES / "nsys").with_suffix("")
    return ORACLES / "__".join(rel.parts)


@pytest.fixture(scope="session")
def sample_workspace(tmp_path_factory) -> Path:
    """sample_traces/ ingested once per test run (each ingest of it costs seconds of analysis):
    open it read-only, or `copy_workspace` it before writing."""
    from nsight_analyze.ingest.run import ingest

    db = tmp_path_factory.mktemp("sample_workspace") / "sample.duckdb"
    ingest([ROOT / "sample_traces"], db, analyze="all")  # tests read any table of it, read-only
    return db


def copy_workspace(src: Path, dst: Path) -> Path:
    """A private copy of a closed workspace file (its .wal too, if one was left)."""
    shutil.copy(src, dst)
    wal = src.with_name(src.name + ".wal")
    if wal.exists():
        shutil.copy(wal, dst.with_name(dst.name + ".wal"))
    return dst


def ingested(paths: list[Path], db: Path, read_only: bool = True):
    """Ingest `paths` into the new workspace file `db` and return a connection to it (read-only
    unless asked: a test that only reads cannot change what it checks)."""
    from nsight_analyze.ingest.run import ingest
    from nsight_analyze.store.workspace import open_workspace

    ingest(paths, db)
    return open_workspace(db, read_only=read_only)


# Real traces ingested once per test process (shared_ingest), by (paths, what was analysed).
_SHARED_INGESTS: dict[tuple, tuple[Any, Path]] = {}


def shared_ingest(paths: Sequence[Path], analyze: str | None = "all") -> tuple[Any, Path]:
    """(ingest report, workspace file) of real traces beside the project, ingested once per test
    process: the same trace is read by several test modules, and each ingest of one costs seconds.
    Every table is computed (`analyze`), so that readers find them stored; the on-demand tables
    equal the eager ones (tests/test_lazy_analysis.py). The file is shared: open it read-only or
    `copy_workspace` it. Not for a test that changes what the ingest reads (a setting, a module
    attribute or the environment through monkeypatch): that test ingests its own."""
    key = (tuple(str(p) for p in paths), analyze)
    if key not in _SHARED_INGESTS:
        from nsight_analyze.ingest.run import ingest

        folder = Path(tempfile.mkdtemp(prefix="nsight_analyze_test_ingest_"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        db = folder / "ws.duckdb"
        _SHARED_INGESTS[key] = (ingest(list(paths), db, analyze=analyze), db)
    return _SHARED_INGESTS[key]


def shared_ingested(paths: Sequence[Path], db: Path):
    """`ingested` for real traces, from shared_ingest: a read-only connection to a private copy of
    the shared workspace at `db` (the test may hand `db` on, e.g. to the CLI)."""
    from nsight_analyze.store.workspace import open_workspace

    return open_workspace(copy_workspace(shared_ingest(paths)[1], db), read_only=True)


@pytest.fixture
def workspace_of(tmp_path):
    """Ingest the given paths into a fresh workspace and return an open connection."""
    from nsight_analyze.ingest.run import ingest
    from nsight_analyze.store.workspace import open_workspace

    def make(*paths: Path, name: str = "ws.duckdb"):
        db = tmp_path / name
        ingest(list(paths), db)
        return open_workspace(db)

    return make


@dataclass(frozen=True)
class SynthJob:
    """A generated job: its nsys exports (`traces`), its ingested workspace (`db`) and the
    generator's ground truth (`truth`, the dict `synth.generate` returns)."""

    traces: Path
    db: Path
    truth: dict


def _synth_key(injections: Sequence[str], shape: dict) -> tuple:
    return tuple(injections), tuple(sorted(shape.items()))


@pytest.fixture(scope="session")
def synth_job(tmp_path_factory) -> Callable[..., SynthJob]:
    """(injections, **generator shape) -> SynthJob, generated and ingested once per test run: the
    same job (same injections, ranks, steps, seed...) asked for by several tests or modules is
    generated once (each costs seconds of generation and analysis). Open `db` read-only, or
    `copy_workspace` it before writing: other tests read the same file."""
    from nsight_analyze.ingest.run import ingest
    from nsight_analyze.synth import generate

    cache: dict[tuple, SynthJob] = {}

    def get(injections: Sequence[str] = (), **shape) -> SynthJob:
        key = _synth_key(injections, shape)
        if key not in cache:
            out = tmp_path_factory.mktemp("synth_job")
            truth = generate(out / "traces", injections=list(injections), **shape)
            # shared by tests that read any table with a plain connection: everything computed
            ingest(sorted((out / "traces").glob("*.sqlite")), out / "ws.duckdb", analyze="all")
            cache[key] = SynthJob(out / "traces", out / "ws.duckdb", truth)
        return cache[key]

    return get


@pytest.fixture(scope="session")
def synth_diagnosis(synth_job) -> Callable[..., tuple]:
    """(injections, **generator shape) -> (diagnose() result with the default thresholds, SynthJob):
    a `synth_job` diagnosed once per test run, on a read-only connection."""
    from nsight_analyze.diagnose import diagnose
    from nsight_analyze.store.workspace import open_workspace

    cache: dict[tuple, tuple] = {}

    def get(injections: Sequence[str] = (), **shape) -> tuple:
        key = _synth_key(injections, shape)
        if key not in cache:
            job = synth_job(injections, **shape)
            con = open_workspace(job.db, read_only=True)
            try:
                cache[key] = (diagnose(con), job)
            finally:
                con.close()
        return cache[key]

    return get


def synth_cases(synth_diagnosis, cases: dict[str, Sequence[str]], shape: dict) -> Callable[[str], tuple]:
    """case -> (findings, truth, SynthJob) for a module's `cases` (name -> injections), every one
    generated with the same generator `shape`: the `synthetic` fixture of a module."""

    def get(case: str) -> tuple:
        findings, job = synth_diagnosis(cases[case], **shape)
        return findings, job.truth, job

    return get


@pytest.fixture(params=[True, False], ids=["duckdb", "ijson"])
def fast_path(request, monkeypatch):
    """Each Kineto parse path in turn: the DuckDB fast path and the ijson fallback."""
    from nsight_analyze.sources import kineto

    monkeypatch.setattr(kineto, "FAST_PATH", request.param)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A test worker whose tests all passed removes its temporary folder, the session-scoped
    fixtures' workspaces included (pyproject's tmp_path_retention_policy removes a passing test's
    own tmp_path; pytest leaves a basetemp given by pytest-xdist's controller, as each worker's is:
    some 2 GB a run, three runs kept)."""
    if exitstatus == 0 and hasattr(session.config, "workerinput"):
        shutil.rmtree(session.config._tmp_path_factory.getbasetemp(), ignore_errors=True)
