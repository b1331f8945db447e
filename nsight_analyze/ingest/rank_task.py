"""What a worker does: prepare a file (hash, export, probe), then map a batch of files (canonical
rows and rank-local results into one rank-store entry).

Both tasks are plain functions of picklable arguments, so they run alike in this process, in a
local worker process (`ingest --jobs N`) or on a Dask worker (`ingest --dask ADDRESS`). They
never open the workspace: only the client writes it. A file the worker cannot read comes back
as one line in the result, not as an exception.
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import time
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import duckdb

from .. import analysis, classify
from ..errors import UserError
from ..sources import registry
from ..sources.base import CORRUPT_TIMING, BadInput, LoadResult, Probe
from ..store import schema
from ..store.duck import OFFLINE_CONFIG, bound_memory, offline, rollback, sql_rows
from ..store.live_layer import ensure_layer, settings_as_variables
from ..store.query_layer import statements
from . import rank_store
from .discovery import export_cache

NSYS_REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
# Tests only: crash the worker process (os._exit) while it maps a file whose path contains the
# value; `SUBSTRING@FOLDER` crashes once, leaving a marker in FOLDER (the retry then succeeds).
# Read on the client and sent with each task, so long-lived workers need not share its environment.
CRASH_ENV = "NSIGHT_ANALYZE_TEST_CRASH"
SQL = statements("ingest/rank_task")  # read once per worker process


@dataclass
class Prepared:
    """A file hashed, exported if it is a report, and probed; `error` says why not."""

    sha256: str = ""
    readable: str = ""
    probe: Probe | None = None
    error: str | None = None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    if path.is_dir():  # a folder input (sources/registry.walk): its files' names and contents
        for sub in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(sub.relative_to(path).as_posix().encode() + b"\0" + sha256_of(sub).encode())
        return digest.hexdigest()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def export_nsys_report(report: Path, db: Path, sha: str) -> Path:
    """Export a .nsys-rep/.qdrep with the nsys CLI into a cache beside the workspace."""
    out = export_cache(db) / f"{report.stem}-{sha[:12]}.sqlite"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".partial.sqlite")
    cmd = [
        "nsys",
        "export",
        "--type",
        "sqlite",
        "--force-overwrite",
        "true",
        "--output",
        str(tmp),
        str(report),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0 or not tmp.exists():
        last = (proc.stderr or proc.stdout).strip().splitlines()
        raise BadInput(f"nsys export failed ({last[-1] if last else 'exit ' + str(proc.returncode)})")
    tmp.rename(out)
    return out


def prepare(path: str, source: str, db: str, hasher: Executor | None = None) -> Prepared:
    """Hash, export (.nsys-rep through the nsys CLI, into the cache beside the workspace) and probe.

    A report is hashed first (its export is cached under that hash); another file is hashed
    on `hasher`'s thread, when given, while it is probed. Without a hasher this runs on a
    worker, and a missing file means the worker does not see the client's files.
    """
    p = Path(path)
    try:
        if p.suffix.lower() in NSYS_REPORT_SUFFIXES:
            sha = sha256_of(p)
            readable = export_nsys_report(p, Path(db), sha)
            return Prepared(sha, str(readable), registry.module(source).probe(readable))
        digest = hasher.submit(sha256_of, p) if hasher is not None else None
        try:
            probe = registry.module(source).probe(p)
        finally:
            sha = digest.result() if digest is not None else sha256_of(p)
        return Prepared(sha, str(p), probe)
    except BadInput as exc:
        return Prepared(error=str(exc))
    except FileNotFoundError as exc:
        if hasher is not None:
            return Prepared(error=f"unreadable ({exc.strerror or exc})")
        return Prepared(error=_unseen(p))
    except OSError as exc:
        return Prepared(error=f"unreadable ({exc.strerror or exc})")


def _unseen(path: Path) -> str:
    return (
        f"worker on {socket.gethostname()} cannot open {path}: every worker must see the input files "
        "(a filesystem shared by the client and the workers)"
    )


@dataclass
class MapSpec:
    """One file of a batch: what a worker needs to map it; the client numbered its ranks."""

    path: str
    readable: str
    source: str  # sources/ module name
    file_id: int
    ranks: dict[int, int]  # Process.key -> rank
    rank_sources: dict[int, str]
    job_ranks: dict[int, int]
    probe: Probe


@dataclass
class MapBatch:
    """Files one task maps together into one rank-store entry.

    Why a batch: the rank-local step is about a hundred statements and an entry some forty
    Parquet files, whatever the size of the input; run once per file they cost more than the
    mapping of a small file (benchmarks/bench_scale.py), run once per batch they are shared.
    """

    files: list[MapSpec]
    settings: list[tuple]  # the workspace's settings rows (step pattern, user rules, ...)
    entry: str  # the rank-store folder to write
    tables: list[str] | None = None  # the stored results to compute (None: every one)
    crash: str = field(default_factory=lambda: os.environ.get(CRASH_ENV, ""))  # tests only (CRASH_ENV)


@dataclass
class Mapped:
    """One file's outcome in a batch (its rows are in the batch's entry unless `error`)."""

    path: str
    file_id: int
    counts: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class BatchMapped:
    """What a task hands back; `error` fails the whole batch (the client retries its files alone)."""

    entry: str
    files: list[Mapped] = field(default_factory=list)
    stamp: str = ""
    seconds: float = 0.0
    error: str | None = None

    def manifest(self) -> dict:
        return {"stamp": self.stamp, "seconds": self.seconds, "files": [vars(m) for m in self.files]}

    @classmethod
    def from_manifest(cls, entry: str, manifest: dict) -> BatchMapped:
        files = [Mapped(**m) for m in manifest["files"]]
        return cls(entry, files, manifest["stamp"], manifest.get("seconds", 0.0))


def map_batch(batch: MapBatch) -> BatchMapped:
    """Load a batch of files into a private in-memory database (one transaction each, so a bad
    file is rolled back alone; each file's kernels classified as it loads: load_file), compute
    their ranks' rank-local results and write both to one rank-store entry
    (rank_store.write_entry).

    `out.stamp` holds the rules' stamp once a file loaded (load_file stamps them); a batch where
    none loaded hands back no results, so the client reads its stamp for no rank."""
    started = time.perf_counter()
    con = _fresh_database()
    made: analysis.Made = []
    out = BatchMapped(batch.entry)
    try:
        if batch.settings:
            con.executemany(SQL["store_setting"], batch.settings)
        settings_as_variables(con)
        canonical = schema.canonical_tables()
        for spec in batch.files:
            _maybe_crash(spec.path, batch.crash)
            out.files.append(_load(con, spec))
        out.stamp = analysis.global_stamp(con)
        loaded = any(m.error is None and spec.ranks for m, spec in zip(out.files, batch.files))
        made = analysis.rank_local_step(con, tables=batch.tables) if loaded else []
        filled = [t for t in canonical if con.execute(f'SELECT count(*) FROM main."{t}"').fetchone()[0]]
        out.seconds = time.perf_counter() - started
        results = [n for n in analysis.rank_results() if batch.tables is None or n in batch.tables]
        rank_store.write_entry(con, Path(batch.entry), filled, results if made else [], out.manifest())
        return out
    except (BadInput, duckdb.Error, UserError) as exc:
        out.error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return out
    except FileNotFoundError as exc:
        out.error = _unseen(Path(exc.filename or batch.entry))
        return out
    finally:
        out.seconds = time.perf_counter() - started
        _release_database(con, made)


def _load(con: duckdb.DuckDBPyConnection, spec: MapSpec) -> Mapped:
    """One file's rows (load_file), in one transaction."""
    source = registry.module(spec.source)
    con.execute("BEGIN TRANSACTION")
    try:
        result = load_file(
            con,
            source,
            Path(spec.readable),
            spec.file_id,
            spec.probe,
            spec.ranks,
            spec.rank_sources,
            spec.job_ranks,
        )
        con.execute("COMMIT")
    except (BadInput, duckdb.Error, UserError) as exc:
        rollback(con)
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return Mapped(spec.path, spec.file_id, error=message)
    except FileNotFoundError:
        rollback(con)
        return Mapped(spec.path, spec.file_id, error=_unseen(Path(spec.readable)))
    except BaseException:
        rollback(con)
        raise
    finally:
        if hasattr(source, "release"):
            source.release(con)
    return Mapped(spec.path, spec.file_id, result.counts, result.warnings, result.skipped)


def load_file(
    con: duckdb.DuckDBPyConnection,
    source: ModuleType,
    readable: Path,
    file_id: int,
    probe: Probe,
    ranks: dict[int, int],
    rank_sources: dict[int, str],
    job_ranks: dict[int, int],
) -> LoadResult:
    """One file's rows into `con`, in the caller's transaction: its source's canonical rows, a
    warning per table holding rows that end before they start, its `ranks` rows, and its kernels
    classified (classify.classify_kernels: those its source left unclassified, and the rules'
    stamp).

    Why one function: it is the one place an ingest classifies kernels, for the file read in the
    client (landing.load_one) and for a worker's (`_load`) alike, inside the file's transaction
    (a file whose classification fails rolls back alone). Why per file, not once per batch:
    the sources classify on insert (classify.build_name_map), so what is left per file is a
    count of the unclassified kernels and the stamp, about 2 ms; mapping 32 synth ranks in 4
    batches of 8 took 4.9 s CPU per file against 5.1 s per batch (medians of 4, interleaved).
    """
    result = source.load(con, readable, file_id, ranks, probe)
    result.warnings += backwards_warnings(con, list(ranks.values()))
    insert_ranks(con, file_id, probe, ranks, rank_sources, job_ranks)
    classify.classify_kernels(con)
    return result


_database: duckdb.DuckDBPyConnection | None = None  # this worker process's, reused across its tasks


def _fresh_database() -> duckdb.DuckDBPyConnection:
    """An in-memory database with the workspace schema and live views and no rows.

    Why reused: creating the schema and the ~60 live views costs about half a second, as much as
    mapping a small file; a worker maps many files one after another.
    """
    global _database
    if _database is None:
        con = offline(duckdb.connect(config=OFFLINE_CONFIG))
        con.execute("SET threads = 1")  # one worker process per core
        bound_memory(con)
        ensure_layer(con, analysis.layer_hash(), analysis.SCHEMA_VERSION)
        _database = con
    return _database


def _release_database(con: duckdb.DuckDBPyConnection, made: analysis.Made) -> None:
    """Empty the reused database for the next task; a database in an unknown state is dropped."""
    global _database
    try:
        analysis.drop_made(con, made)
        for kind, listing in (("VIEW", SQL["temp_views"]), ("TABLE", SQL["temp_tables"])):
            for (name,) in con.execute(listing).fetchall():
                con.execute(f'DROP {kind} IF EXISTS temp.main."{name}"')  # what a source left
        for table in [*schema.canonical_tables(), "settings"]:
            con.execute(SQL.sql("empty_table", table=table))
        con.execute(SQL["forget_rules_stamp"])
    except duckdb.Error:
        con.close()
        _database = None


def insert_ranks(
    con: duckdb.DuckDBPyConnection,
    file_id: int,
    probe: Probe,
    ranks: dict[int, int],
    rank_sources: dict[int, str],
    job_ranks: dict[int, int],
) -> None:
    """One `ranks` row per process of the file (its job is set by the job step, merge_jobs)."""
    rows = [
        (
            ranks[proc.key],
            file_id,
            proc.pid,
            proc.key,
            proc.hostname,
            proc.device_id,
            proc.gpu_name,
            proc.session_start_utc_ns,
            None,
            rank_sources[proc.key],
            proc.local_rank,
            proc.world_size,
            None,
            job_ranks.get(proc.key, ranks[proc.key]),
        )  # fmt: skip
        for proc in probe.processes
    ]
    if rows:
        con.execute(SQL.sql("insert_ranks", rows=sql_rows(rows)))


TIMED_TABLES = ("kernels", "memops", "cuda_api", "nvtx")


def backwards_warnings(con: duckdb.DuckDBPyConnection, ranks: list[int]) -> list[str]:
    """One warning per canonical table holding rows of `ranks` that end before they start.

    Why: a tracer's clock error (a CUPTI timestamp wrap, a buffer flushed late) leaves such rows;
    the time partition counts them as zero time and duration sums take them as recorded, so a
    user must hear of them rather than see a partition quietly short of the kernels' own sum.
    """
    if not ranks:
        return []
    in_ranks = analysis.rank_list(ranks)
    rows = con.execute(
        " UNION ALL ".join(SQL.sql("backwards_rows", table=t, ranks=in_ranks) for t in TIMED_TABLES)
    ).fetchall()
    return [
        f"{CORRUPT_TIMING}{n:,} row(s) of {table} end before they start (by up to {worst:,} ns: a tracer "
        "clock error); the time partition counts them as zero time, duration sums as recorded"
        for table, n, worst in rows
        if n
    ]


def _maybe_crash(path: str, value: str) -> None:
    if not value:
        return
    needle, _, marker_dir = value.partition("@")
    if needle not in path:
        return
    if marker_dir:
        marker = Path(marker_dir) / (Path(path).name + ".crashed")
        if marker.exists():
            return
        marker.touch()
    os._exit(17)
