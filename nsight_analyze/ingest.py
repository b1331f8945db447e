"""Ingest a folder of per-rank traces into one workspace, one transaction per file.

Order of work: discover files -> export .nsys-rep with the nsys CLI when present ->
probe every file (cheap metadata) -> number the ranks across all files -> load each
file in its own transaction -> classify kernels -> align clocks. A file that fails is
rolled back and reported in one line; the others still load. Re-ingesting the same
content is a no-op (sha256), so an interrupted ingest is simply run again.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from . import analysis, classify, rank_store, run_labels
from .discovery import Candidate, assign_ranks, discover, natural_key, path_text, utf8_path
from .duck import checkpoints_held, no_room, no_room_error, sql_row, sql_string, sql_value
from .errors import UserError, WorkspaceBusy
from .executors import Executor, WorkerDied, open_executor
from .landing import FileOutcome, land_batch, load_one
from .rank_pipeline import Early, RankPipeline
from .rank_task import (
    NSYS_REPORT_SUFFIXES,
    BatchMapped,
    MapBatch,
    MapSpec,
    Prepared,
    export_cache,
    map_batch,
    prepare,
)
from .sources import nsys_recipe, registry
from .workspace import open_workspace

INGEST_MEMORY_LIMIT = "512MB"
# Inputs smaller than this in all load in this process when the number of workers is left to
# the default: starting worker processes would cost more than they save.
SMALL_INPUT_BYTES = 64 << 20
# ... nor on fewer cores than this: with 2 workers and the client sharing 2 cores the ingest
# gains little (benchmarks/bench_scale.py, docs/scale.md: 1.17x), while each worker holds a batch
# in memory beside the client.
AUTO_MIN_CORES = 4
# Worker tasks: files are mapped in batches of at most this much input, at least this many per
# worker (ingest._batches).
BATCH_BYTES = 96 << 20
# The rank-local step runs beside the load (rank_pipeline) for inputs of at least this much in
# all: below it the load is too short to hide anything, and the extra rank batch it costs
# (binding every query once more) shows. The real nsys-ai set (4 files, 7.8 MB) took 2.25 s with
# it against 1.90 s without; 16 ranks x 200k kernels (23 MB a file) 16.9 s against 20.1 s. The
# bound lies between the two, not measured closer.
PIPELINE_MIN_BYTES = 32 << 20
TASKS_PER_WORKER = 2


@dataclass
class IngestReport:
    db: Path
    outcomes: list[FileOutcome] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # seconds spent: "prepare" (hash, export, probe), "load" (read or map the files and land
    # them), "analysis" (the stored results: rank-local ones not computed by workers, the job's),
    # of which "analysis_rank" (the rank-local step, or reading the workers' results) and
    # "analysis_job" (the job step)
    seconds: dict[str, float] = field(default_factory=dict)

    def by_status(self, status: str) -> list[FileOutcome]:
        return [o for o in self.outcomes if o.status == status]

    @property
    def failed(self) -> bool:
        return bool(self.by_status("failed"))


def _special_file(path: Path) -> str | None:
    """What `path` is when it is neither a regular file nor a folder (nor a dangling link, which
    the readers report): a named pipe, a socket or a device. Why: opening a FIFO blocks until a
    writer comes, so reading one to sniff its format hung the ingest."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return None


NOT_UTF8 = "its path is not valid UTF-8, which DuckDB cannot open: rename it, or link it under a UTF-8 name"


UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _unrecognised(path: Path) -> str:
    """Why a file is not read. UTF-16 text is said as such: a CSV or scrape redirected to a file
    by Windows PowerShell is UTF-16, which no reader here takes."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(2)
    except OSError:
        head = b""
    if head in UTF16_BOMS:
        return "UTF-16 text, not a recognised trace format: convert it to UTF-8 (iconv -f UTF-16 -t UTF-8)"
    return "not a recognised trace format"


def _exports_beside(paths: list[Path], nsys_cli: bool, loaded: set[str], replace: bool) -> dict[Path, str]:
    """{path: why it is skipped} for each .nsys-rep/.qdrep whose .sqlite export lies beside it
    (same folder and stem, as `nsys stats` and `nsys export` leave it): one of the two is read.

    Why: reading both numbered the same ranks twice, and the second file's became a phantom
    second job. A report the workspace holds (`loaded`: resolved paths) stays, unless
    `replace`; otherwise the export is read, unless it is older than its report and nsys can
    export the report again (a stale export of an earlier capture under the same name)."""
    exports = {(p.parent, p.stem): p for p in paths if p.suffix.lower() == ".sqlite"}
    skip: dict[Path, str] = {}
    for rep in (p for p in paths if p.suffix.lower() in NSYS_REPORT_SUFFIXES):
        export = exports.get((rep.parent, rep.stem))
        if export is None:
            continue
        if str(rep.resolve()) in loaded and not replace:
            skip[export] = (
                f"the export of {rep.name}, which the workspace holds already (--replace reads the "
                "export in its place)"
            )
            continue
        try:
            stale = rep.stat().st_mtime > export.stat().st_mtime + 1
        except OSError:
            stale = False
        if stale and nsys_cli:
            skip[export] = f"older than its report {rep.name} beside it, which is exported and read instead"
        else:
            skip[rep] = f"its export {export.name} beside it is read instead" + (
                " (older than the report; nsys, not on PATH, cannot export it again)" if stale else ""
            )
    return skip


def _loaded_files(db: Path) -> set[str]:
    """The paths of the files an existing workspace holds (status ok)."""
    if not db.exists():
        return set()
    con = open_workspace(db, read_only=True, analyse=False)
    try:
        return {p for (p,) in con.execute("SELECT path FROM files WHERE status = 'ok'").fetchall()}
    finally:
        con.close()


def _classify_candidates(paths: list[Path], report: IngestReport, db: Path, replace: bool) -> list[Candidate]:
    candidates: list[Candidate] = []
    nsys_cli = shutil.which("nsys")
    pairs = any(p.suffix.lower() in NSYS_REPORT_SUFFIXES for p in paths)  # read the workspace only then
    beside = _exports_beside(paths, bool(nsys_cli), _loaded_files(db) if pairs else set(), replace)
    reports = [p for p in paths if p.suffix.lower() in NSYS_REPORT_SUFFIXES and p not in beside]
    if reports and not nsys_cli:
        report.notes.append(
            f"nsys CLI not found on PATH: {len(reports)} .nsys-rep/.qdrep file(s) skipped "
            "(export them with `nsys export --type sqlite` or put nsys on PATH)"
        )
    for path in paths:
        special = _special_file(path)
        if special:
            report.outcomes.append(FileOutcome(path, "ignored", f"{special}, not a regular file: not read"))
            continue
        if path in beside:
            report.outcomes.append(FileOutcome(path, "skipped", beside[path]))
            continue
        if path.suffix.lower() in NSYS_REPORT_SUFFIXES:
            if not nsys_cli:
                report.outcomes.append(FileOutcome(path, "skipped", "nsys CLI not on PATH"))
            else:
                candidates.append(Candidate(path, path, registry.module("nsys_sqlite")))
            continue
        if path.name in run_labels.LABEL_FILES:  # a run's labels, read with its files (labels_for)
            continue
        module = registry.source_for(path)
        if module is None:
            report.outcomes.append(FileOutcome(path, "ignored", _unrecognised(path)))
        elif not utf8_path(path.absolute()):
            report.outcomes.append(FileOutcome(path, "failed", NOT_UTF8))
        else:
            candidates.append(Candidate(path, path, module))
    return candidates


def ingest(
    inputs: list[Path] | Path,
    db: Path | str,
    jobs: int | None = 1,
    replace: bool = False,
    rules: Path | None = None,
    progress: Callable[[FileOutcome, int, int], None] | None = None,
    analysis_progress: Callable[[int, int], None] | None = None,
    dask: str | None = None,
    labels: dict[str, str] | None = None,
    analyze: analysis.Wanted = None,
) -> IngestReport:
    """Load traces into the workspace; see the module docstring for the guarantees.

    `jobs`: worker processes that read the files and compute their rank-local results (1: this
    process; None: the machine's cores, for inputs of at least SMALL_INPUT_BYTES on machines of
    at least AUTO_MIN_CORES cores). `dask`: run
    those tasks on a Dask cluster instead (executors.DaskCluster). `progress(outcome, done,
    total)` follows the files loaded; `analysis_progress(done, total)` the rank batches of the
    analysis computed after them (analysis.refresh). `labels`: run labels ({key: value},
    `--label`) of the runs these files make, besides those of run.toml / run.json files beside
    them (run_labels.py); a conflict between the two is a UserError before anything is written.
    `analyze`: the stored results computed now (None: the first answers, `analysis.FIRST_ANSWERS`;
    "all"; or names); every other one is computed when first read.
    """
    inputs = [Path(p) for p in (inputs if isinstance(inputs, list) else [inputs])]
    db = Path(db)
    report = IngestReport(db=db)
    paths = discover(inputs, db)
    candidates = _classify_candidates(paths, report, db, replace)
    if not candidates and not report.outcomes:
        raise UserError(f"no trace files found below {', '.join(map(str, inputs))}")
    by_path = run_labels.labels_for([c.path for c in candidates], inputs, labels or {})
    for cand in candidates:
        cand.labels = by_path[cand.path]
    sources = {c.source for c in candidates}
    hashes = {c.path: c for c in candidates}  # _ingest drops the failed ones from `candidates`
    existed = db.exists() or Path(f"{db}.wal").exists()
    exports_existed = export_cache(db).exists()
    executor = (
        open_executor(_workers(candidates, jobs), dask) if _use_workers(candidates, jobs, dask) else None
    )
    first = candidates[0] if candidates else None
    if (
        executor is None
        and first is not None
        and hasattr(first.source, "prefetch")
        and first.readable == first.path
    ):
        first.source.prefetch(first.path)  # the first file is parsed while all are prepared
    try:
        try:
            _ingest(candidates, db, report, executor, rules, replace, progress, analysis_progress, analyze)
        finally:  # the workers stop before a failed ingest's workspace is removed
            if executor is not None:
                executor.close()
            for source in sources:
                if hasattr(source, "cancel_prefetch"):
                    source.cancel_prefetch()
        if not existed and not report.by_status("ok") and _discard_new_workspace(db, exports_existed):
            return report
        if existed or any(o.status in NOT_LOADED for o in report.outcomes):
            try:
                _record_not_loaded(db, report, hashes)
            except UserError as exc:  # what loaded stays loaded; only the list of the others is missing
                report.notes.append(f"files not loaded were not recorded in the workspace ({exc})")
    except BaseException as exc:
        full = no_room(exc)  # what loaded before is of no use on a full disk: a new one goes
        if not existed and (full or not report.by_status("ok")) and not isinstance(exc, WorkspaceBusy):
            _discard_new_workspace(db, exports_existed, loaded_by_us=full)
        if full and not isinstance(exc, UserError):
            raise no_room_error(exc) from None
        raise
    return report


NOT_LOADED = ("failed", "skipped", "ignored")


def _shown(path: Path) -> Path:
    """The absolute path a not-loaded file is recorded under: resolved like loaded files, except
    a dangling link, which keeps its own name (its missing target would say nothing)."""
    try:
        return path.resolve(strict=True)
    except OSError:
        return path.absolute()


def _discard_new_workspace(db: Path, exports_existed: bool, loaded_by_us: bool = False) -> bool:
    """Remove a workspace this ingest created but loaded nothing into (a failed ingest leaves
    no file behind); False when it holds files after all (another process loaded them), unless
    `loaded_by_us`: this ingest failed while it held the workspace, so the files are its own."""
    if loaded_by_us:
        _remove_workspace(db, exports_existed)
        return True
    try:
        con = open_workspace(db, read_only=True, analyse=False)
    except UserError:  # not there, busy, or not a workspace: nothing of ours to remove
        return not db.exists()
    try:
        if con.execute("SELECT count(*) FROM files").fetchone()[0]:
            return False
    finally:
        con.close()
    _remove_workspace(db, exports_existed)
    return True


def _remove_workspace(db: Path, exports_existed: bool) -> None:
    for path in (db, Path(f"{db}.wal")):
        path.unlink(missing_ok=True)
    if not exports_existed:
        shutil.rmtree(export_cache(db), ignore_errors=True)
    shutil.rmtree(rank_store.store_dir(db), ignore_errors=True)


def _record_not_loaded(db: Path, report: IngestReport, cands: dict[Path, Candidate]) -> None:
    """One `files` row per file this ingest did not load (status failed, skipped or ignored, the
    reason in `warnings`), replacing earlier such rows of the paths seen, so `info` lists them."""
    shown = {o.path: _shown(o.path) for o in report.outcomes}  # resolved once: 1 s for 5,500 files
    seen = [
        path_text(p) for o in report.outcomes for p in {o.path.resolve(), o.path.absolute(), shown[o.path]}
    ]
    rows = [o for o in report.outcomes if o.status in NOT_LOADED]
    con = open_workspace(db, analyse=False)  # no GPU data changes: the stored results stay valid
    try:
        con.execute("BEGIN TRANSACTION")
        paths = f"{sql_value(seen)}::VARCHAR[]"
        con.execute(f"DELETE FROM files WHERE status <> 'ok' AND path IN (SELECT unnest({paths}))")
        next_id = con.execute("SELECT coalesce(max(file_id), 0) + 1 FROM files").fetchone()[0]
        values = []
        for i, outcome in enumerate(rows):
            cand = cands.get(outcome.path)
            try:
                size = outcome.path.stat().st_size
            except OSError:
                size = None
            known = sql_row(
                (
                    next_id + i,
                    path_text(shown[outcome.path]),
                    cand.sha256 if cand is not None else "",
                    size,
                    cand.probe.format if cand is not None and cand.probe is not None else None,
                )
            )
            message = sql_value([outcome.message] if outcome.message else [])
            values.append(
                f"({known}, NULL, NULL, now(), {sql_value(outcome.status)}, {message}::VARCHAR[], [])"
            )
        # one statement per 1,000 rows, not per file: a folder of 5,500 logs beside the traces
        # took 3.9 s in 5,500 INSERTs
        for start in range(0, len(values), 1000):
            con.execute(f"INSERT INTO files VALUES {', '.join(values[start : start + 1000])}")
        con.execute("COMMIT")
    finally:
        con.close()


def _workers(cands: list[Candidate], jobs: int | None) -> int:
    return max(1, min(jobs or os.cpu_count() or 1, len(cands)))


def _use_workers(cands: list[Candidate], jobs: int | None, dask: str | None) -> bool:
    """Worker processes (or Dask) for two files or more; by default only for inputs large enough
    to repay starting them."""
    if dask:
        return True
    if len(cands) < 2 or _workers(cands, jobs) < 2:
        return False
    if jobs is not None:
        return True
    if (os.cpu_count() or 1) < AUTO_MIN_CORES:
        return False
    return _input_bytes(cands) >= SMALL_INPUT_BYTES


def _input_bytes(cands: list[Candidate]) -> int:
    size = 0
    for cand in cands:
        try:
            size += cand.path.stat().st_size
        except OSError:
            pass
    return size


def _ingest(
    candidates: list[Candidate],
    db: Path,
    report: IngestReport,
    executor: Executor | None,
    rules: Path | None,
    replace: bool,
    progress: Callable[[FileOutcome, int, int], None] | None,
    analysis_progress: Callable[[int, int], None] | None = None,
    analyze: analysis.Wanted = None,
) -> IngestReport:
    started = time.perf_counter()
    con = _prepare_all(candidates, db, report, executor)
    report.seconds["prepare"] = time.perf_counter() - started
    try:
        with checkpoints_held(con):  # the close checkpoints what is left, once
            # A file loads in one transaction; past this much memory DuckDB spills it to disk, so
            # peak memory does not grow with the size of the export.
            con.execute(f"SET memory_limit = '{INGEST_MEMORY_LIMIT}'")
            if rules is not None:
                classify.store_user_rules(con, rules)
            ready = _dedupe(con, candidates, replace, report)
            nsys_recipe.attach(con, ready)  # recipe outputs of these reports: read beside their ranks
            _refuse_mixed_formats(con, ready)
            _number_ranks(con, ready, report)
            nsys_recipe.resolve(ready)
            to_load = [c for c in ready if c.file_id is not None]
            # what the rank-local step of the new files computes: what is asked for, and what the
            # workspace holds already (recomputed for the new ranks: analysis.plan)
            tables = analysis.targets(analyze) | analysis.computed(con)
            precomputed: dict[int, dict[str, Path]] = {}
            early = None
            started = time.perf_counter()
            if executor is not None:
                precomputed = _map_and_land(con, executor, to_load, db, report, progress, tables)
            else:
                early = _load_here(con, to_load, report, progress, tables)
            report.seconds["load"] = time.perf_counter() - started
            started = time.perf_counter()
            if report.by_status("ok") or analyze is not None:
                _post_ingest(con, report, analysis_progress, precomputed, early, analyze)
            report.seconds["analysis"] = time.perf_counter() - started
        con.execute("CHECKPOINT")  # the close's own, which says nothing when it fails (a full disk)
        rank_store.remove_store(rank_store.store_dir(db))  # the workspace holds what it held
    finally:
        con.close()
    report.outcomes.sort(key=lambda o: natural_key(o.path))
    return report


def _prepare_all(
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


def _load_here(
    con: duckdb.DuckDBPyConnection,
    to_load: list[Candidate],
    report: IngestReport,
    progress: Callable[[FileOutcome, int, int], None] | None,
    tables: set[str] | None = None,
) -> Early | None:
    """Load the files one after another in this process (one transaction each), the rank-local
    step of those landed running beside (rank_pipeline) where it can use a core the loading
    leaves idle. Returns what that step computed."""
    own_threads = [getattr(c.source, "PARSES_IN_OWN_THREADS", False) for c in to_load]
    if to_load and all(own_threads):
        # the sources' parsers keep the cores busy; a second worker thread of this connection
        # only spins and contends with them
        con.execute("SET threads = 1")
    pipelined = (
        len(to_load) >= 2
        and not any(own_threads)
        and (os.cpu_count() or 1) >= 2
        and _input_bytes(to_load) >= PIPELINE_MIN_BYTES
    )
    if pipelined:
        classify.classify_kernels(con)  # stamps the rules first, so the stamp holds from here on
    with RankPipeline(con, tables=tables) if pipelined else nullcontext() as pipeline:
        for done, cand in enumerate(to_load, 1):
            if done < len(to_load) and hasattr(to_load[done].source, "prefetch"):
                to_load[done].source.prefetch(to_load[done].readable)  # parsed while this one loads
            outcome = load_one(con, cand)
            report.outcomes.append(outcome)
            if pipeline is not None and outcome.status == "ok":
                pipeline.submit(outcome.ranks, sum(outcome.counts.get(t, 0) for t in analysis.COUNTED))
            if progress:
                progress(outcome, done, len(to_load))
        return pipeline.finish() if pipeline is not None else None


def _map_and_land(
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
    classify.classify_kernels(con)  # the workers classified every kernel; this stamps the rules
    current = analysis.global_stamp(con)
    return {r: parts for r, parts in precomputed.items() if stamps[r] == current}


def _batches(cands: list[Candidate], workers: int) -> list[list[Candidate]]:
    """Consecutive files grouped into tasks: at least TASKS_PER_WORKER per worker (so a slow
    task does not leave the others idle at the end) and at most BATCH_BYTES of input each (a
    worker holds its batch in memory); a larger file is a task alone."""
    sizes = [nsys_recipe.input_size(c.readable) or 0 for c in cands]
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


def _dedupe(con: duckdb.DuckDBPyConnection, cands: list[Candidate], replace: bool, report: IngestReport):
    ready = []
    seen: dict[str, Path] = {}
    for cand in cands:
        if cand.sha256 in seen:
            report.outcomes.append(
                FileOutcome(cand.path, "unchanged", f"same content as {seen[cand.sha256]}")
            )
            continue
        seen[cand.sha256] = cand.path
        # rows of files that were not loaded (status failed, skipped, ignored) are no content
        same = con.execute(
            f"SELECT file_id FROM files WHERE sha256 = {sql_string(cand.sha256)} AND status = 'ok'"
        ).fetchall()
        same_path = con.execute(
            f"SELECT file_id FROM files WHERE path = {sql_string(str(cand.path.resolve()))} AND status = 'ok'"
        ).fetchall()
        if same and not replace:
            report.outcomes.append(
                FileOutcome(cand.path, "unchanged", "already in the workspace (same content)")
            )
            continue
        loaded_report = _loaded_report_of(con, cand.path)
        if loaded_report and not replace:
            report.outcomes.append(
                FileOutcome(
                    cand.path,
                    "skipped",
                    f"the export of {loaded_report[0][1]}, which the workspace holds already "
                    "(--replace reads the export in its place)",
                )
            )
            continue
        cand.replaces = sorted({r[0] for r in same + same_path + loaded_report}) if replace else []
        if same_path and not replace and not same:
            report.outcomes.append(
                FileOutcome(cand.path, "failed", "content changed since last ingest (use --replace)")
            )
            continue
        ready.append(cand)
    return ready


def _loaded_report_of(con: duckdb.DuckDBPyConnection, path: Path) -> list[tuple[int, str]]:
    """(file_id, name) of the .nsys-rep/.qdrep beside the .sqlite `path` that the workspace holds.
    Why: `nsys stats` writes that export after the report was ingested; read as a new file it
    claimed the report's ranks again and became a phantom second job (_exports_beside covers a
    pair met in one ingest)."""
    if path.suffix.lower() != ".sqlite":
        return []
    base = path.resolve().with_suffix("")
    names = ", ".join(sql_string(f"{base}{suffix}") for suffix in NSYS_REPORT_SUFFIXES)
    rows = con.execute(
        f"SELECT file_id, path FROM files WHERE status = 'ok' AND path IN ({names})"
    ).fetchall()
    return [(fid, Path(p).name) for fid, p in rows]


def _refuse_mixed_formats(con: duckdb.DuckDBPyConnection, ready: list[Candidate]) -> None:
    """One job, one profiler: nsys and Kineto timelines of the same ranks cannot be merged."""
    formats = {c.probe.format for c in ready if c.probe.processes}
    formats |= {
        f
        for (f,) in con.execute(
            "SELECT DISTINCT source_format FROM files JOIN ranks USING (file_id)"
        ).fetchall()
    }
    if len(formats) > 1:
        advice = nsys_recipe.unmatched_hint(ready) or "ingest each profiler's traces into its own workspace"
        mixed = ", ".join(sorted(formats))
        raise UserError(f"these traces mix formats ({mixed}) for the ranks of one job; {advice} (--db)")


def _number_ranks(con: duckdb.DuckDBPyConnection, ready: list[Candidate], report: IngestReport) -> None:
    replaced = {fid for c in ready for fid in c.replaces}
    taken = {
        r: p
        for r, p, fid in con.execute(
            "SELECT r.rank, f.path, f.file_id FROM ranks r JOIN files f USING (file_id)"
        ).fetchall()
        if fid not in replaced
    }
    report.notes.extend(assign_ranks(ready, taken).values())
    next_id = con.execute("SELECT coalesce(max(file_id), 0) + 1 FROM files").fetchone()[0]
    for cand in ready:
        cand.file_id = next_id
        next_id += 1


def _post_ingest(
    con: duckdb.DuckDBPyConnection,
    report: IngestReport,
    progress: Callable[[int, int], None] | None = None,
    precomputed: dict[int, dict[str, Path]] | None = None,
    early: Early | None = None,
    analyze: analysis.Wanted = None,
) -> None:
    """Compute the stored results of the new and changed ranks (or read those the workers
    computed), then the job's (clock alignment included: session start (UTC), refined from
    collectives)."""
    # DCGM samples belong to a host and GPU; the ranks on them may come in any file, any ingest
    report.notes.extend(registry.module("dcgm").match_ranks(con))
    steps: dict[str, float] = {}
    report.notes.extend(
        analysis.refresh(
            con, progress=progress, precomputed=precomputed, seconds=steps, early=early, wanted=analyze
        )
    )
    report.seconds.update({f"analysis_{step}": s for step, s in steps.items()})
