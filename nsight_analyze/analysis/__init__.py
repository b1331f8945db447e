"""The analysis layer, computed once and stored: rank by rank, then the job.

Why: every command reads the same answers (time_partition, gaps, collectives, imbalance, ...).
Re-deriving them from nested views per command and per read cost minutes at 64 ranks and ran
out of memory; stored tables are read in milliseconds, and each answer exists once.

Two steps (queries/ declares which query belongs to which, see query_layer):
- the rank-local step, `rank_local_step(con)`: a pure function of the canonical rows visible
  to the connection under their usual names (kernels, memops, cuda_api, nvtx, ...). It leaves
  that batch's results as TEMP tables (a worker's, which it writes to Parquet) or appends them
  to the staged tables (`refresh`'s). `refresh` shows it one small batch of ranks at a time
  (temp views filtering the canonical tables), so memory is bounded by the largest batch, not
  by the job; a worker process can show it one rank's rows read from its file instead.
- the job-level step, `job_step(con)`: clock alignment, collective matching, waits,
  imbalance and the other cross-rank tables, over the stored per-rank results.

State: the results are stamped with what they were computed from: a global stamp (queries,
schema, settings: step pattern, rules, thresholds stored there) and one fingerprint per rank
(its file's content hash and its row counts). `refresh` recomputes only ranks whose
fingerprint changed (all of them when the global stamp did), then the job step (of the new jobs
alone when the ranks added form jobs of their own: by_job.py); nothing when nothing changed.
Everything is written in one transaction: a kill leaves the previous results or none, never half.

What is computed, and when (plan.py): an ingest computes the first answers (FIRST_ANSWERS: what
`summary` and `ranks` read); every other stored result is computed the first time a reader asks
for it (`refresh(wanted=...)`: the closure of what it reads, for every rank, the results held
read as they are: `_extend`) and kept; `meta.analysis_tables` lists what is held under the
stamps. Why: the user who wanted the time partition should not wait for fused-kernel chains and
CUDA-graph candidates first, and most sessions never read most tables.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from ..store import query_layer, schema
from ..store.duck import bound_memory, checkpoints_held, has_relation, main_schema, rollback, sql_rows
from ..store.query_layer import statements
from . import by_job
from .plan import (
    COUNTED,
    FIRST_ANSWERS,
    MANY_RUNS_ANSWERS,
    SCHEMA_VERSION,
    STATE_TABLE,
    TABLES_KEY,
    Plan,
    Wanted,
    _objects,
    all_stored,
    computed,
    global_stamp,
    layer_hash,
    parse_analyze,
    plan,
    stored_closure,
    targets,
)
from .progress import Progress, tty_progress
from .steps import (
    ALIGNMENT_READS,
    BATCH_EVENTS,
    STAGED,
    Made,
    Staging,
    _run,
    batches,
    drop_made,
    job_step,
    last_readers,
    rank_list,
    rank_local_step,
    rank_queries,
    rank_results,
    shadow_ranks,
)

if TYPE_CHECKING:
    from ..ingest.rank_early import Early

SQL = statements("analysis/analysis")
STAGED_CLOCKS = f"{STAGED}_ranks_alignment"  # the job step's `ranks` columns, for the swap
EARLY = f"{STAGED}early_"  # rank_pipeline's tables (staged too: a leftover is dropped as one)

__all__ = [
    "ALIGNMENT_READS", "BATCH_EVENTS", "COUNTED", "EARLY", "FIRST_ANSWERS", "MANY_RUNS_ANSWERS",
    "SCHEMA_VERSION", "STAGED", "STATE_TABLE", "TABLES_KEY", "Made", "Plan", "Staging", "Wanted",
    "all_stored", "batches", "computed",
    "compute_in_session", "drop_made", "global_stamp", "job_step", "last_readers", "layer_hash",
    "parse_analyze", "plan", "rank_list", "rank_local_step", "rank_queries", "rank_results", "refresh",
    "shadow_ranks", "stored_closure", "targets", "tty_progress", "_run",
]  # fmt: skip


def refresh(
    con: duckdb.DuckDBPyConnection,
    force: bool = False,
    batch_events: int = BATCH_EVENTS,
    progress: Progress | None = None,
    say: Callable[[str], None] | None = None,
    precomputed: dict[int, dict[str, Path]] | None = None,
    seconds: dict[str, float] | None = None,
    early: Early | None = None,
    wanted: Wanted = None,
) -> list[str]:
    """Bring the stored results up to date with the workspace; returns the alignment's notes.

    `wanted`: what the caller reads (stored results or any query names; "all"; None: the first
    answers); the closure of it is computed if missing or stale (`plan`), nothing else.
    A no-op when nothing changed. `say` receives the one line telling why it recomputes;
    `seconds`, when given, the time of the rank-local step ("rank") and the job step ("job").
    `precomputed` gives ranks whose rank-local results a worker already computed with the
    current global stamp ({rank: {result name: Parquet file}}, rank_store): they are read, not
    recomputed (a file's Parquet holds all its ranks; each is read once). `early` gives ranks
    whose results an ingest computed while it loaded (rank_pipeline), taken under the same stamp
    rule; its tables are dropped in any case.

    Why staged tables and not one transaction around everything: DuckDB reads data written by
    the running transaction several times slower (the gap and sync-call joins most of all),
    so the results are computed into `_staged_*` tables in autocommit mode and swapped in by
    one short transaction of renames, stamps and clock offsets included. When some ranks are
    unchanged, only the stale ranks' rows are staged (the job step reads them beside the kept
    ranks' stored rows) and the swap replaces those ranks' rows: copying every kept row into the
    staged tables cost time and memory in proportion to the job, not to what changed. A kill or
    an error before the swap leaves the previous results; the staged leftovers are dropped by
    the next recompute.
    """
    p = plan(con, wanted)
    if force:
        p.full, p.ranks, p.job, p.reason = True, sorted(p.fingerprints), True, "recompute requested"
        p.tables, p.extend = p.have | targets(wanted), set()
    if not p.needed:
        return []
    notes: list[str] = []
    with checkpoints_held(con):  # one checkpoint after the swap, not one every batch or two
        if p.outdated:
            notes = _recompute(con, p, say, batch_events, progress, precomputed or {}, seconds, early)
        elif early is not None:
            _drop_staged(con)
        if p.extend:
            _extend(con, p, say, batch_events, progress)
        if wanted is None and _many_runs(con):  # `runs` is this workspace's first answer
            more = plan(con, MANY_RUNS_ANSWERS)
            if more.extend:
                _extend(con, more, say, batch_events, progress)
    return notes


def _many_runs(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the workspace holds more than one run (job)."""
    return has_relation(con, "jobs") and con.execute("SELECT count(*) > 1 FROM jobs").fetchone()[0]


def _recompute(
    con: duckdb.DuckDBPyConnection,
    p: Plan,
    say: Callable[[str], None] | None,
    batch_events: int,
    progress: Progress | None,
    precomputed: dict[int, dict[str, Path]],
    seconds: dict[str, float] | None,
    early: Early | None,
) -> list[str]:
    """refresh's work once its plan needs some: the staged results, then the swap."""
    if say and (p.ranks or p.removed):  # a new, empty workspace is set up silently
        say(f"analysis {p.reason}: computing {len(p.ranks)} rank(s) and the job")
    taken = _usable(early, p)
    # leftovers of an interrupted recompute (and early results not taken); listing them is not
    # analysis work
    _drop_staged(con, keep=early.tables() if taken else [])
    shown = schema.owned_by(con, "rank")  # the tables each rank batch sees only its own rows of
    _ready(con, sum(p.sizes.values()))
    main = main_schema(con)
    try:
        notes = _compute(
            con,
            p,
            shown,
            batch_events,
            progress,
            precomputed,
            {} if seconds is None else seconds,
            taken,
        )
    except BaseException:
        _abandon(con)
        raise
    con.execute("BEGIN TRANSACTION")
    try:
        existing = _objects(con)
        rank_results = [n for n in query_layer.stored("rank") if n in p.tables]
        # the stale ranks' rows replaced in them; in the job results, the new jobs' (by_job)
        replaced = {n: SQL.sql("stale_rank_rows", ranks=p.stale) for n in rank_results} if p.kept else {}
        replaced.update(by_job.replaced(p))
        for name in sorted(all_stored() - p.tables):  # stale: computed again on their next read
            if existing.get(name):
                con.execute(f'DROP {existing[name].upper()} {main}."{name}"')
        for name in [*rank_results, *(n for n in query_layer.stored("job") if n in p.tables)]:
            if name in replaced:
                stored, staged = f'{main}."{name}"', f'{main}."{STAGED}{name}"'
                con.execute(SQL.sql("delete_rows", table=stored, where=replaced[name]))
                con.execute(SQL.sql("append_staged", table=stored, staged=staged))
                con.execute(f'DROP TABLE {main}."{STAGED}{name}"')
                continue
            _put_in_place(con, main, existing, name)
        con.execute(SQL.sql("update_aligned_ranks", main=main, staged=f'{main}."{STAGED_CLOCKS}"'))
        con.execute(f'DROP TABLE {main}."{STAGED_CLOCKS}"')
        con.execute(SQL.sql("create_rank_state", state=STATE_TABLE))
        state = [(r, fp, p.counts.get(r, ""), p.sizes.get(r, 0)) for r, fp in p.fingerprints.items()]
        if state:
            con.execute(SQL.sql("insert_rank_state", state=STATE_TABLE, rows=sql_rows(state)))
        stamps = {**p.stamps, TABLES_KEY: ",".join(sorted(p.tables))}
        con.execute(SQL.sql("stamp_meta", rows=sql_rows(list(stamps.items()))))
        con.execute("COMMIT")
    except BaseException:
        rollback(con)
        _drop_staged(con)
        raise
    _create_job_macros(con, p.tables)
    if say and by_job.line(p):
        say(by_job.line(p))
    return notes


# Events of the workspace below which the analysis runs on one DuckDB thread: DuckDB hands its
# threads row groups of 122,880 rows, so the others have nothing to scan and only wake and wait
# (Kineto trace_filter, 2 ranks: ingest 1.76 s against 2.79 s, six alternating runs, 2 busy cores).
SMALL_JOB_EVENTS = 122_880


def _ready(con: duckdb.DuckDBPyConnection, events: int | None = None) -> None:
    """The connection as the queries expect it: the memory cap, every thread (one for a
    workspace of fewer than SMALL_JOB_EVENTS `events`), settings as variables."""
    from ..store.live_layer import settings_as_variables

    bound_memory(con)
    con.execute("SET threads = 1" if events is not None and events < SMALL_JOB_EVENTS else "RESET threads")
    settings_as_variables(con)


def _abandon(con: duckdb.DuckDBPyConnection) -> None:
    """After a failed computation: its staged tables dropped, the previous results kept."""
    try:  # the cleanup (catalog queries, drops) must not run out of memory itself
        con.execute("SET memory_limit = '1GiB'")
        _drop_staged(con)
    finally:
        bound_memory(con)


def _put_in_place(con: duckdb.DuckDBPyConnection, main: str, existing: dict[str, str], name: str) -> None:
    """The staged table of `name` renamed to it, in place of the stored one (inside the swap)."""
    if existing.get(name):
        con.execute(f'DROP {existing[name].upper()} {main}."{name}"')
    con.execute(SQL.sql("rename_table", table=f'{main}."{STAGED}{name}"', to=name))


def _drop_staged(con: duckdb.DuckDBPyConnection, keep: list[str] | None = None, prefix: str = STAGED) -> None:
    main = main_schema(con)
    for name, kind in _objects(con).items():
        if name.startswith(prefix) and name not in (keep or ()):
            con.execute(f'DROP {kind.upper()} {main}."{name}"')


def _usable(early: Early | None, p: Plan) -> list[int]:
    """The ranks of `early` refresh takes: all of them when they were computed under the current
    stamp and are all stale (they always are after the ingest that computed them), else none."""
    if early is None or early.failed or early.stamp != p.stamps["analysis_global"]:
        return []
    if not set(query_layer.stored("rank")) & p.tables <= set(early.names):
        return []
    return early.ranks if set(early.ranks) <= set(p.ranks) else []


def _compute(
    con: duckdb.DuckDBPyConnection,
    p: Plan,
    tables: list[str],
    batch_events: int,
    progress: Progress | None,
    precomputed: dict[int, dict[str, Path]],
    seconds: dict[str, float],
    early: list[int],
) -> list[str]:
    """Fill `_staged_<name>` for every stored result: the ranks an ingest computed early, rank
    batches (or the workers' results), then the job step."""
    started = time.perf_counter()
    main = main_schema(con)
    rank_results = [n for n in query_layer.stored("rank") if n in p.tables]
    if p.kept:  # only the stale ranks' rows are staged: empty tables typed as the stored ones
        for name in rank_results:
            con.execute(SQL.sql("empty_copy", table=f'{main}."{STAGED}{name}"', source=f'{main}."{name}"'))
    created = _take_early(con, main, rank_results, early, not p.kept) or bool(p.kept)
    if early:
        _drop_staged(con, prefix=EARLY)  # early results of tables not recomputed now
    read = {r: parts for r, parts in precomputed.items() if r in p.ranks and set(rank_results) <= set(parts)}
    # a full recompute computes at least an empty batch: it creates the staged tables, typed
    # as the queries type them, which the workers' Parquet rows are then cast to
    computed = set(read) | set(early)
    todo = batches([r for r in p.ranks if r not in computed], p.sizes, batch_events) or (
        [] if created else [[]]
    )
    _stage_batches(con, main, todo, tables, not created, p.tables, set(), progress)
    _stage_precomputed(con, main, rank_results, read)
    seconds["rank"] = time.perf_counter() - started
    started = time.perf_counter()
    # the job step reads the new rank results under their own names, and aligns the clocks in
    # a private copy of `ranks`, written back by the swap
    made = [(name, "VIEW") for name in rank_results] + [("ranks", "TABLE")]
    for name in rank_results:
        rows = SQL.sql("staged_rows", staged=f'{main}."{STAGED}{name}"')
        if p.kept:  # with the kept ranks' stored rows (the staged tables have their columns' order)
            # the stale ranks filtered out (few); listing the kept ones (many) cost the job step
            # of one changed rank in 64 x 200k kernels 17.6 s instead of 13.4 s
            stored = f'{main}."{name}"'
            if p.ranks or p.removed:
                rows = SQL.sql("kept_and_staged_rows", stored=stored, ranks=p.stale, staged_rows=rows)
            else:
                rows = SQL.sql("stored_and_staged_rows", stored=stored, staged_rows=rows)
        con.execute(SQL.sql("temp_view", name=name, rows=rows))
    con.execute(SQL.sql("copy_ranks", main=main))
    try:
        if by_job.scope(con, main, p):  # new runs only: the job step of their jobs alone
            job_made, notes = by_job.step(con, main, p)
        else:
            job_made, notes = job_step(con, tables=p.tables)
        made += job_made
        for name in [n for n in query_layer.stored("job") if n in p.tables]:
            con.execute(SQL.sql("table_copy", table=f'{main}."{STAGED}{name}"', source=f'temp.main."{name}"'))
        con.execute(SQL.sql("staged_clocks", table=f'{main}."{STAGED_CLOCKS}"'))
    finally:
        drop_made(con, made)
    seconds["job"] = time.perf_counter() - started
    return notes


def _stage_batches(
    con: duckdb.DuckDBPyConnection,
    main: str,
    todo: list[list[int]],
    shown: list[str],
    create: bool,
    tables: set[str],
    inputs: set[str],
    progress: Progress | None,
) -> None:
    """The rank-local step of each batch of ranks in `todo` (the canonical tables `shown` filtered
    to the batch), appended to the staged tables of `tables`; `create`: the first batch creates
    them. `inputs`: held results read as they are (the batch's rows)."""
    for done, batch in enumerate(todo, 1):
        made = shadow_ranks(con, batch, shown)
        try:
            staging = Staging(main, batch, create=create and done == 1)
            made += rank_local_step(con, staging, tables=tables, inputs=inputs)
        finally:
            drop_made(con, made)
        if progress:
            progress(done, len(todo))


def _take_early(
    con: duckdb.DuckDBPyConnection, main: str, names: list[str], ranks: list[int], rename: bool
) -> bool:
    """The early results of `ranks` into the staged tables: renamed to them when these do not
    exist yet (no copy), else appended. Returns whether the staged tables exist now."""
    if not ranks:
        return False
    for name in names:
        if rename:
            con.execute(SQL.sql("rename_table", table=f'{main}."{EARLY}{name}"', to=f"{STAGED}{name}"))
        else:
            staged, early = f'{main}."{STAGED}{name}"', f'{main}."{EARLY}{name}"'
            con.execute(SQL.sql("append_early", table=staged, early=early, ranks=rank_list(ranks)))
            con.execute(f'DROP TABLE {main}."{EARLY}{name}"')
    return True


def _stage_precomputed(
    con: duckdb.DuckDBPyConnection, main: str, names: list[str], read: dict[int, dict[str, Path]]
) -> None:
    """Append the workers' rank-local results of the ranks in `read` to the staged tables."""
    for name in names:
        files = sorted({str(parts[name]) for parts in read.values() if name in parts})
        if not files:
            continue
        ranks = ", ".join(str(int(r)) for r in read)
        con.execute(SQL.sql("append_parquet", table=f'{main}."{STAGED}{name}"', ranks=ranks), [files])


def _extend(
    con: duckdb.DuckDBPyConnection,
    p: Plan,
    say: Callable[[str], None] | None,
    batch_events: int,
    progress: Progress | None,
) -> None:
    """Compute the stored results in `p.extend` for every rank and the job, reading those the
    workspace holds (`p.have`, up to date) as they are; swap them in with one transaction.

    Why: each analysis is computed the first time something reads it, and only then: an ingest
    computes the first answers, `diagnose` the tables its rules read, and so on."""
    have = p.have if not p.outdated else p.tables
    names = sorted(p.extend, key=lambda n: (n.startswith("_"), n))  # the public ones named first
    if say:
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        say(f"analysis: computing {shown} (first use; stored for the next command)")
    main = main_schema(con)
    rank_names = [n for n in query_layer.stored("rank") if n in p.extend]
    job_names = [n for n in query_layer.stored("job") if n in p.extend]
    _drop_staged(con)
    _ready(con, sum(p.sizes.values()))
    try:
        if rank_names:
            todo = batches(sorted(p.fingerprints), p.sizes, batch_events) or [[]]
            _stage_batches(con, main, todo, schema.owned_by(con, "rank"), True, p.extend, have, progress)
        made = [(n, "VIEW") for n in rank_names]
        for name in rank_names:
            rows = SQL.sql("staged_rows", staged=f'{main}."{STAGED}{name}"')
            con.execute(SQL.sql("temp_view", name=name, rows=rows))
        try:
            if job_names:
                job_made, _ = job_step(con, align=False, tables=p.extend, inputs=have)
                made += job_made
                for name in job_names:
                    staged, temp = f'{main}."{STAGED}{name}"', f'temp.main."{name}"'
                    con.execute(SQL.sql("table_copy", table=staged, source=temp))
        finally:
            drop_made(con, made)
    except BaseException:
        _abandon(con)
        raise
    con.execute("BEGIN TRANSACTION")
    try:
        existing = _objects(con)
        for name in names:
            _put_in_place(con, main, existing, name)
        held = ",".join(sorted(have | p.extend))
        con.execute(SQL.sql("stamp_meta", rows=sql_rows([(TABLES_KEY, held)])))
        con.execute("COMMIT")
    except BaseException:
        rollback(con)
        _drop_staged(con)
        raise
    _create_job_macros(con, have | p.extend)


def _create_job_macros(con: duckdb.DuckDBPyConnection, held: set[str], temporary: bool = False) -> None:
    """The job stage's macros over stored results, kept in the workspace for users' SQL: those
    whose results are held (the others are created once `sql` has computed what they read, and
    dropped from the workspace meanwhile). `temporary`: for this session only, over results
    computed for it (compute_in_session); the workspace's own are left as they are."""
    for q in query_layer.of_stage("job"):
        if q.kind != "macro":
            continue
        if stored_closure([q.name]) <= held:
            con.execute(q.create("view", temporary=temporary))
        elif not temporary:
            con.execute(f"DROP {q.drop_keyword} IF EXISTS {main_schema(con)}.{q.name}")


def compute_in_session(con: duckdb.DuckDBPyConnection, wanted: Wanted = None) -> None:
    """Stale or missing results on a workspace this process cannot write: compute what `wanted`
    needs as TEMP tables.

    They shadow the stored tables for this connection only (the file is unchanged); the clock
    offsets stay as stored. Used when another process holds the write lock or the file is
    read-only. Up-to-date stored results are read as they are.
    """
    from ..store.live_layer import settings_as_variables

    settings_as_variables(con)
    p = plan(con, wanted)
    tables, inputs = (p.tables, set()) if p.outdated else (p.extend, p.have)
    if p.outdated and not p.full:  # some ranks changed: everything wanted, from the canonical rows
        tables = targets(wanted)
    if not tables:
        return
    made = rank_local_step(con, tables=tables, inputs=inputs)
    drop_made(con, [m for m in made if m[0] not in tables])
    made, _ = job_step(con, align=False, tables=tables, inputs=inputs)
    drop_made(con, [m for m in made if m[0] not in tables])
    _create_job_macros(con, tables | inputs, temporary=True)  # the macros over them too
