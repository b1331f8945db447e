"""Ingest a folder of per-rank traces into one workspace, one transaction per file.

Order of work: discover files -> export .nsys-rep with the nsys CLI when present ->
probe every file (cheap metadata) -> number the ranks across all files -> load each
file in its own transaction -> classify kernels -> align clocks. A file that fails is
rolled back and reported in one line; the others still load. Re-ingesting the same
content is a no-op (sha256), so an interrupted ingest is simply run again.

This module runs those steps in order, in one process or with workers; which files are read and
which are new is inputs.py's, the work spread over workers or threads workers.py's,
the report and what an ingest leaves behind report.py's.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import duckdb

from .. import analysis, classify, run_labels
from ..errors import UserError, WorkspaceBusy
from ..sources import registry
from ..store.duck import checkpoints_held, no_room, no_room_error
from . import rank_store
from .discovery import Candidate, discover, natural_key
from .executors import Executor, open_executor
from .inputs import classify_candidates, dedupe, number_ranks, refuse_mixed_formats
from .landing import FileOutcome, load_one
from .rank_pipeline import Early, RankPipeline
from .rank_task import export_cache
from .report import NOT_LOADED, IngestReport, discard_new_workspace, record_not_loaded
from .workers import input_bytes, map_and_land, prepare_all, use_workers, worker_count

INGEST_MEMORY_LIMIT = "512MB"
# The rank-local step runs beside the load (rank_pipeline) for inputs of at least this much in
# all: below it the load is too short to hide anything, and the extra rank batch it costs
# (binding every query once more) shows. The real nsys-ai set (4 files, 7.8 MB) took 2.25 s with
# it against 1.90 s without; 16 ranks x 200k kernels (23 MB a file) 16.9 s against 20.1 s. The
# bound lies between the two, not measured closer.
PIPELINE_MIN_BYTES = 32 << 20


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
    process; None: the machine's cores, for inputs of at least workers.SMALL_INPUT_BYTES on
    machines of at least workers.AUTO_MIN_CORES cores). `dask`: run
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
    candidates = classify_candidates(paths, report, db, replace)
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
        open_executor(worker_count(candidates, jobs), dask) if use_workers(candidates, jobs, dask) else None
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
        if not existed and not report.by_status("ok") and discard_new_workspace(db, exports_existed):
            return report
        if existed or any(o.status in NOT_LOADED for o in report.outcomes):
            try:
                record_not_loaded(db, report, hashes)
            except UserError as exc:  # what loaded stays loaded; only the list of the others is missing
                report.notes.append(f"files not loaded were not recorded in the workspace ({exc})")
    except BaseException as exc:
        full = no_room(exc)  # what loaded before is of no use on a full disk: a new one goes
        if not existed and (full or not report.by_status("ok")) and not isinstance(exc, WorkspaceBusy):
            discard_new_workspace(db, exports_existed, loaded_by_us=full)
        if full and not isinstance(exc, UserError):
            raise no_room_error(exc) from None
        raise
    return report


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
    con = prepare_all(candidates, db, report, executor)
    report.seconds["prepare"] = time.perf_counter() - started
    try:
        with checkpoints_held(con):  # the close checkpoints what is left, once
            # A file loads in one transaction; past this much memory DuckDB spills it to disk, so
            # peak memory does not grow with the size of the export.
            con.execute(f"SET memory_limit = '{INGEST_MEMORY_LIMIT}'")
            if rules is not None:
                classify.store_user_rules(con, rules)
            ready = dedupe(con, candidates, replace, report)
            registry.attach(con, ready)  # inputs read beside these files' ranks (recipe outputs)
            refuse_mixed_formats(con, ready)
            number_ranks(con, ready, report)
            registry.resolve(ready)
            to_load = [c for c in ready if c.file_id is not None]
            # what the rank-local step of the new files computes: what is asked for, and what the
            # workspace holds already (recomputed for the new ranks: analysis.plan)
            tables = analysis.targets(analyze) | analysis.computed(con)
            precomputed: dict[int, dict[str, Path]] = {}
            early = None
            started = time.perf_counter()
            if executor is not None:
                precomputed = map_and_land(con, executor, to_load, db, report, progress, tables)
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
        and input_bytes(to_load) >= PIPELINE_MIN_BYTES
    )
    if pipelined:
        classify.stamp_rules(con)  # before the pipeline takes the stamp; each file's load stamps alike
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
