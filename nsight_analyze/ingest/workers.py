"""The work of an ingest spread over workers or threads: each file prepared, batches of files mapped.

Why its own module: whether worker processes (or a Dask cluster: executors.py) pay for an input
is decided here, and so is what they run: every file is hashed, exported and probed
(rank_task.prepare) on the workers, or on threads of this process while the workspace opens; with
workers, batches of files are mapped into the rank store (rank_task.map_batch) and each batch is
landed in the workspace (landing.land_batch, one transaction) as it comes back. run.py calls
`prepare_all`, then `map_and_land` or its own one-process load.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb

from .. import analysis, classify
from ..sources import registry
from ..store.duck import no_room, no_room_error
from ..store.workspace import open_workspace
from . import rank_store
from .discovery import Candidate
from .executors import Executor, WorkerDied
from .landing import FileOutcome, land_batch
from .rank_task import BatchMapped, MapBatch, MapSpec, Prepared, map_batch, prepare
from .report import IngestReport

# Inputs smaller than this in all load in this process when the number of workers is left to
# the default: starting worker processes would cost more than they save.
SMALL_INPUT_BYTES = 64 << 20
# ... nor on fewer cores than this: with 2 workers and the client sharing 2 cores the ingest
# gains little (benchmarks/bench_scale.py, docs/scale.md: 1.17x), while each worker holds a batch
# in memory beside the client.
AUTO_MIN_CORES = 4
# Worker tasks: files are mapped in batches of at most this much input, at least this many per
# worker (_batches).
BATCH_BYTES = 96 << 20
TASKS_PER_WORKER = 2


def worker_count(cands: list[Candidate], jobs: int | None) -> int:
    """The workers to start: `jobs` (None: every core), no more than there are files."""
    return max(1, min(jobs or os.cpu_count() or 1, len(cands)))


def use_workers(cands: list[Candidate], jobs: int | None, dask: str | None) -> bool:
    """Worker processes (or Dask) for two files or more; by default only for inputs large enough
    to repay starting them."""
    if dask:
        return True
    if len(cands) < 2 or worker_count(cands, jobs) < 2:
        return False
    if jobs is not None:
        return True
    if (os.cpu_count() or 1) < AUTO_MIN_CORES:
        return False
    return input_bytes(cands) >= SMALL_INPUT_BYTES


def input_bytes(cands: list[Candidate]) -> int:
    """The files' size in all (a file that cannot be read counts 0: its load says why)."""
    size = 0
    for cand in cands:
        try:
            size += cand.path.stat().st_size
        except OSError:
            pass
    return size


def prepare_all(
    candidates: list[Candidate], db: Path, report: IngestReport, executor: Executor | None
) -> duckdb.DuckDBPyConnection:
    """Hash, export and probe every file (on the workers, or on threads of this process) while
    the workspace opens; drops the files that failed. Returns the workspace connection."""
    if executor is not None:
        errors: dict[int, str | None] = {}

        def prepared(i: int, result) -> None:
            if isinstance(result, WorkerDied):
                errors[i] = result.message
                return
            _take(candidates[i], result)
            errors[i] = result.error

        executor.run(
            _prepare_task, [(i, str(c.path), _source_name(c), str(db)) for i, c in
                            enumerate(candidates)], lambda item, result: prepared(item[0], result)
        )  # fmt: skip
        _drop_failed(candidates, [errors.get(i) for i in range(len(candidates))], report)
        return open_workspace(db, analyse=False)
    # the pool is left (all files prepared) before the hasher its tasks submit to
    with ThreadPoolExecutor(max_workers=1) as hasher, ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(_prepare_one, cand, db, hasher) for cand in candidates]
        try:
            con = open_workspace(db, analyse=False)  # meanwhile the files are hashed and probed
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    try:
        _drop_failed(candidates, [future.result() for future in futures], report)
    except BaseException:
        con.close()
        raise
    return con


def _source_name(cand: Candidate) -> str:
    """The name a worker passes to registry.module() to import the file's source again."""
    return cand.source.__name__.rsplit(".", 1)[-1]


def _prepare_task(item: tuple[int, str, str, str]):
    return prepare(*item[1:])


def map_and_land(
    con: duckdb.DuckDBPyConnection,
    executor: Executor,
    to_load: list[Candidate],
    db: Path,
    report: IngestReport,
    progress: Callable[[FileOutcome, int, int], None] | None,
    tables: set[str] | None = None,
) -> dict[int, dict[str, Path]]:
    """Map batches of files on the executor's workers into the rank store; land each batch in
    the workspace (one transaction) as it comes back. Returns the workers' rank-local results
    per rank (read by the analysis; the store is removed after it).

    A batch whose worker died twice, or that failed as a whole, is mapped again one file per
    task, so only the file at fault fails. An entry left complete by an earlier, killed ingest
    of the same batch, numbering and analysis is landed without being mapped again.
    """
    store = rank_store.store_dir(db)
    rank_store.clear_partials(store)
    store.mkdir(parents=True, exist_ok=True)
    settings = con.execute("SELECT key, value, description FROM settings ORDER BY key").fetchall()
    computes = sorted(tables) if tables is not None else None
    stamp = hashlib.sha256(
        f"{analysis.layer_hash()}|{settings}|{classify.BUILTIN_RULES.read_bytes().hex()}|{computes}".encode()
    ).hexdigest()
    cands: dict[str, list[Candidate]] = {}  # entry -> its files

    def batch_of(files: list[Candidate]) -> MapBatch:
        keys = [rank_store.file_key(c.sha256, c.ranks, c.rank_sources, c.job_ranks, stamp) for c in files]
        entry = str(store / rank_store.entry_key(keys))
        cands[entry] = files
        specs = [MapSpec(str(c.path), str(c.readable), _source_name(c), c.file_id, c.ranks,
                         c.rank_sources, c.job_ranks, c.probe) for c in files]  # fmt: skip
        return MapBatch(specs, settings, entry, computes)

    precomputed: dict[int, dict[str, Path]] = {}
    stamps: dict[int, str] = {}
    again: list[Candidate] = []

    def land(batch: MapBatch, result: BatchMapped | WorkerDied) -> None:
        files = cands[batch.entry]
        if not isinstance(result, WorkerDied) and result.error and no_room(result.error):
            raise no_room_error(result.error)  # the store's disk is full: so would be every file
        if isinstance(result, WorkerDied) or result.error:
            if len(files) > 1:
                again.extend(files)
                return
            message = result.message if isinstance(result, WorkerDied) else result.error
            outcomes = [FileOutcome(files[0].path, "failed", message)]
        else:
            outcomes = land_batch(con, list(zip(files, result.files)), Path(batch.entry))
            parts = rank_store.tables(Path(batch.entry), "results")
            for cand, outcome in zip(files, outcomes):
                if outcome.status == "ok":
                    for rank in cand.ranks.values():
                        precomputed[rank], stamps[rank] = parts, result.stamp
        for outcome in outcomes:
            report.outcomes.append(outcome)
            if progress:
                progress(outcome, len(report.outcomes), len(to_load))

    todo = []
    for batch in map(batch_of, _batches(to_load, executor.workers)):
        manifest = rank_store.read_manifest(Path(batch.entry))
        if manifest is not None:
            land(batch, BatchMapped.from_manifest(batch.entry, manifest))
        else:
            todo.append(batch)
    executor.run(map_batch, todo, land)
    if again:  # the files of batches that failed as a whole, one per task
        executor.run(map_batch, [batch_of([c]) for c in again], land)
    classify.stamp_rules(con)  # the workers classified every kernel; landing them does not stamp
    current = analysis.global_stamp(con)
    return {r: parts for r, parts in precomputed.items() if stamps[r] == current}


def _batches(cands: list[Candidate], workers: int) -> list[list[Candidate]]:
    """Consecutive files grouped into tasks: at least TASKS_PER_WORKER per worker (so a slow
    task does not leave the others idle at the end) and at most BATCH_BYTES of input each (a
    worker holds its batch in memory); a larger file is a task alone."""
    sizes = [registry.input_size(c.readable) or 0 for c in cands]
    per_task = -(-len(cands) // (workers * TASKS_PER_WORKER)) if cands else 1
    out: list[list[Candidate]] = []
    total = 0
    for cand, size in zip(cands, sizes):
        if out and len(out[-1]) < per_task and total + size <= BATCH_BYTES:
            out[-1].append(cand)
            total += size
        else:
            out.append([cand])
            total = size
    return out


def _prepare_one(cand: Candidate, db: Path, hasher: ThreadPoolExecutor) -> str | None:
    """rank_task.prepare in this process (the file hashed on `hasher` while it is probed);
    the one-line reason when the file cannot be used."""
    result = prepare(str(cand.path), _source_name(cand), str(db), hasher)
    _take(cand, result)
    return result.error


def _take(cand: Candidate, result: Prepared) -> None:
    if result.error is None:
        cand.sha256, cand.readable, cand.probe = result.sha256, Path(result.readable), result.probe


def _drop_failed(cands: list[Candidate], errors: list[str | None], report: IngestReport) -> None:
    for cand, error in zip(list(cands), errors):
        if error:
            report.outcomes.append(FileOutcome(cand.path, "failed", error))
            cands.remove(cand)
