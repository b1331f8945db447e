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
fingerprint changed (all of them when the global stamp did), then the job step; nothing when
nothing changed. Everything is written in one transaction: a kill leaves the previous results
or none, never half.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from . import query_layer, replay, schema
from .duck import bound_memory, checkpoints_held, main_schema, out_of_memory, rollback, sql_rows, sql_string
from .errors import UserError

if TYPE_CHECKING:
    from .rank_pipeline import Early

STATE_TABLE = "_analysis_ranks"
# Canonical rows per rank batch. Each batch costs about 0.25 s beyond its rows (binding some 80
# queries): at 64 ranks x 200k kernels (checkpoints held), batches of 4 M rows (8 ranks) took the
# ingest 58.2-59.7 s against 63.6-64.9 s for 2 M, at the same peak (the cap bounds it: bound_memory).
BATCH_EVENTS = 4_000_000
COUNTED = ("kernels", "memops", "cuda_api", "nvtx", "sync")  # rows that make a rank's size
SCHEMA_VERSION = "2"
STAGED = "_staged_"  # prefix of the tables a recompute fills before it swaps them in
STAGED_CLOCKS = f"{STAGED}_ranks_alignment"  # the job step's `ranks` columns, for the swap
EARLY = f"{STAGED}early_"  # rank_pipeline's tables (staged too: a leftover is dropped as one)
ALIGNED = ("job", "clock_offset_ns", "alignment_method")  # what the job step sets in `ranks`


@dataclass
class Plan:
    """What `refresh` found stale, and why (the one line a command prints before recomputing)."""

    full: bool
    ranks: list[int]
    removed: list[int]
    job: bool
    reason: str
    sizes: dict[int, int] = field(default_factory=dict)
    stamps: dict[str, str] = field(default_factory=dict)
    fingerprints: dict[int, str] = field(default_factory=dict)
    counts: dict[int, str] = field(default_factory=dict)  # per rank: its rows per table, as fingerprinted

    @property
    def needed(self) -> bool:
        return self.full or bool(self.ranks or self.removed) or self.job

    @property
    def kept(self) -> list[int]:
        """The ranks whose stored rank-local results stay as they are (none in a full recompute)."""
        return [] if self.full else sorted(set(self.fingerprints) - set(self.ranks))

    @property
    def stale(self) -> str:
        """The ranks whose stored rows are replaced or removed, as an SQL `IN (...)` list."""
        return rank_list([*self.ranks, *self.removed])


def _objects(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """{name: 'table' | 'view'} of the workspace's main schema."""
    where = "NOT temporary AND database_name = current_database()"
    rows = con.execute(
        f"SELECT table_name, 'table' FROM duckdb_tables() WHERE {where} AND schema_name = 'main' "
        f"UNION ALL SELECT view_name, 'view' FROM duckdb_views() WHERE {where} "
        "AND NOT internal AND schema_name = 'main'"
    ).fetchall()
    return dict(rows)


def layer_hash() -> str:
    """The queries and schema files: a change of either recomputes everything."""
    digest = hashlib.sha256(SCHEMA_VERSION.encode())
    for path in schema.schema_files():
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    for q in sorted(query_layer.layer(), key=lambda q: q.name):  # parsed once per process
        digest.update(f"{q.name}.sql".encode())
        digest.update(q.sql.encode())
    return digest.hexdigest()


def global_stamp(con: duckdb.DuckDBPyConnection) -> str:
    """The queries, the settings (user kernel rules included) and the rules kernels were last
    re-classified with."""
    classified = _meta(con, "classified_with") or ""
    settings = con.execute(
        "SELECT coalesce(string_agg(key || '=' || coalesce(value, ''), chr(31) ORDER BY key), '') "
        "FROM settings"
    ).fetchone()[0]
    return hashlib.sha256(f"{layer_hash()}\x1f{settings}\x1f{classified}".encode()).hexdigest()


def _fingerprints(
    con: duckdb.DuckDBPyConnection, objects: dict[str, str]
) -> tuple[dict[int, str], dict[int, int], str, dict[int, str]]:
    """Per rank: a hash of its file's content hash and its row counts; its event count; the
    workspace's row totals and rank identities (`totals`); and the per-rank counts themselves.
    `objects`: the workspace's tables and views (_objects).

    Counting rows per rank scans every canonical table (0.1 s at 64 ranks x 200k kernels, on
    every command); a table's total is a metadata read. So when the totals and every rank's
    file and source equal those of the last analysis, the per-rank counts are read from it.
    """
    # the schema gives every counted table a rank column: only whether it exists is read (a
    # workspace of an older version may lack one); duckdb_columns() would cost 20 ms a command
    present = [t for t in COUNTED if objects.get(t) == "table"]
    state = _columns_of(con, STATE_TABLE) if objects.get(STATE_TABLE) == "table" else []
    ident = con.execute(
        "SELECT md5(coalesce(string_agg(k.rank || ':' || coalesce(f.sha256, '') || ':' || "
        "coalesce(k.rank_source, ''), ',' ORDER BY k.rank), '')) "
        "FROM ranks k LEFT JOIN files f ON f.file_id = k.file_id"
    ).fetchone()[0]
    sums = con.execute(
        "SELECT " + (", ".join(f"(SELECT count(*) FROM {t})" for t in present) or "1")
    ).fetchone()
    totals = ident + "|" + ",".join(f"{t}:{n}" for t, n in zip(present, sums))
    if _meta(con, "analysis_totals") == totals and "counts" in state:
        counts = f"SELECT rank, counts AS cs, events AS n FROM {STATE_TABLE}"
    else:
        per = " UNION ALL ".join(
            f"SELECT rank, '{t}' AS t, count(*) AS n FROM {t} GROUP BY rank" for t in present
        )
        counts = (
            f"SELECT rank, string_agg(t || ':' || n, ',' ORDER BY t) AS cs, sum(n) AS n "
            f"FROM ({per or 'SELECT NULL::INTEGER AS rank, NULL AS t, NULL::BIGINT AS n'}) GROUP BY rank"
        )
    rows = con.execute(
        f"""WITH c AS ({counts}),
                 r AS (SELECT rank FROM ranks UNION SELECT rank FROM c WHERE rank IS NOT NULL)
            SELECT r.rank,
                   md5(coalesce(any_value(f.sha256), '') || '|' || coalesce(any_value(k.rank_source), '')
                       || '|' || coalesce(any_value(c.cs), '')),
                   coalesce(any_value(c.n), 0)::BIGINT, coalesce(any_value(c.cs), '')
            FROM r LEFT JOIN ranks k ON k.rank = r.rank LEFT JOIN files f ON f.file_id = k.file_id
            LEFT JOIN c ON c.rank = r.rank
            GROUP BY r.rank ORDER BY r.rank"""
    ).fetchall()
    return (
        {int(r): fp for r, fp, _, _ in rows},
        {int(r): int(n) for r, _, n, _ in rows},
        totals,
        {int(r): cs for r, _, _, cs in rows},
    )


def _columns_of(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    """A table's column names, from binding a query of it (no catalog scan)."""
    return [d[0] for d in con.execute(f'SELECT * FROM "{table}" LIMIT 0').description]


def _meta(con: duckdb.DuckDBPyConnection, key: str) -> str | None:
    row = con.execute(f"SELECT value FROM meta WHERE key = {sql_string(key)}").fetchone()
    return row[0] if row else None


def plan(con: duckdb.DuckDBPyConnection) -> Plan:
    """What is stale: cheap (row counts per rank, a few small tables); changes nothing."""
    glob = global_stamp(con)
    objects = _objects(con)
    fps, sizes, totals, counts = _fingerprints(con, objects)
    # files that own no rank feed job results too (a recipe output read beside its reports' ranks)
    (rankless,) = con.execute(
        "SELECT coalesce(string_agg(sha256, ',' ORDER BY sha256), '') FROM files AS f "
        "WHERE coalesce(f.status, 'ok') = 'ok' "
        "AND NOT EXISTS (SELECT 1 FROM ranks AS r WHERE r.file_id = f.file_id)"
    ).fetchone()
    ranked = "".join(f"{r}:{fp};" for r, fp in fps.items())
    job_stamp = hashlib.sha256((glob + ranked + (f"|{rankless}" if rankless else "")).encode()).hexdigest()
    stamps = {"analysis_global": glob, "analysis_job": job_stamp, "analysis_totals": totals}
    missing = [
        n for n in [*query_layer.stored("rank"), *query_layer.stored("job")] if objects.get(n) != "table"
    ]
    if _meta(con, "analysis_global") != glob or missing or objects.get(STATE_TABLE) != "table":
        why = "not computed yet" if _meta(con, "analysis_global") is None else "queries or settings changed"
        if missing and _meta(con, "analysis_global") is not None:
            why = f"{missing[0]} is missing"
        return Plan(True, sorted(fps), [], True, why, sizes, stamps, fps, counts)
    done = dict(con.execute(f"SELECT rank, fingerprint FROM {STATE_TABLE}").fetchall())
    changed = [r for r, fp in fps.items() if done.get(r) != fp]
    removed = sorted(set(done) - set(fps))
    job = _meta(con, "analysis_job") != job_stamp
    reason = f"{len(changed)} rank(s) changed" if changed else ("ranks removed" if removed else "job changed")
    return Plan(False, changed, removed, job or bool(changed or removed), reason, sizes, stamps, fps, counts)


def rank_results() -> list[str]:
    """The stored results of the rank-local step (what a worker hands back per file)."""
    return query_layer.stored("rank")


def batches(ranks: list[int], sizes: dict[int, int], limit: int = BATCH_EVENTS) -> list[list[int]]:
    """Consecutive ranks grouped up to `limit` events per batch (a larger rank is a batch alone)."""
    out: list[list[int]] = []
    current: list[int] = []
    total = 0
    for rank in ranks:
        size = sizes.get(rank, 0)
        if current and total + size > limit:
            out.append(current)
            current, total = [], 0
        current.append(rank)
        total += size
    if current:
        out.append(current)
    return out


def _run(con: duckdb.DuckDBPyConnection, sql: str, name: str) -> None:
    """Execute one query's statement; running out of memory names the query and the cap."""
    try:
        con.execute(sql)
    except duckdb.OutOfMemoryException:
        raise out_of_memory(f"computing {name}") from None


Made = list[tuple[str, str]]  # TEMP objects a step created: (name, DROP keyword)


def drop_made(con: duckdb.DuckDBPyConnection, made: Made) -> None:
    """Drop the TEMP objects a step created, last first."""
    for name, kind in reversed(made):
        con.execute(f'DROP {kind} IF EXISTS temp.main."{name}"')


@dataclass
class Staging:
    """Where a batch's stored rank results go: straight into the staged tables (`{main}._staged_*`,
    created by the first batch), each then shown to the queries after it as a TEMP view of the
    batch's rows. Why: a TEMP table copied into the workspace afterwards is written twice; without
    the copies the rank step of 8 ranks x 200k kernels took 13.0 s instead of 14.9 s (two
    alternating runs each, 2 cores)."""

    main: str
    ranks: list[int]
    create: bool  # the first batch of a full recompute: the staged tables do not exist yet
    prefix: str = STAGED  # the tables' (rank_pipeline's own while an ingest loads)


def _create_stage(
    con: duckdb.DuckDBPyConnection,
    queries: list[query_layer.Query],
    materialise: bool,
    staging: Staging | None = None,
) -> Made:
    """Create a stage's queries as TEMP objects, in order; stored/step ones as tables if asked
    (the stored ones into the staged tables instead, with `staging`). A step table is dropped
    as soon as the last query that reads it has run."""
    made: Made = []
    last = last_readers(queries) if materialise else {}
    for i, q in enumerate(queries):
        _drop_read(con, last, i)
        if q.stage == "live":  # the workspace's own views and macros (they read the shadows)
            continue
        if staging is not None and q.result == "stored":
            table = f'{staging.main}."{staging.prefix}{q.name}"'
            _run(con, q.into(table, create=staging.create), q.name)
            con.execute(
                f'CREATE OR REPLACE TEMP VIEW "{q.name}" AS SELECT * FROM {table} '
                f"WHERE rank IN ({rank_list(staging.ranks)})"
            )
            made.append((q.name, "VIEW"))
            continue
        as_table = materialise and q.result in ("stored", "step")
        _run(con, q.create("table" if as_table else "view", temporary=True), q.name)
        made.append((q.name, q.drop_keyword if not as_table else "TABLE"))
    return made


def last_readers(queries: list[query_layer.Query]) -> dict[str, int]:
    """{step table: position in `queries` of the last query that reads it}, for the step tables
    no query reads through a view that outlives the stage. Why: a step table of a batch of large
    ranks (_kernel_windows, _tp_segments: hundreds of MB) held to the end of the stage is memory
    the later queries cannot use. A view binds the tables it reads whenever a query reads it, so
    its tables live as long as its readers; a view no query of the stage reads is the caller's
    (read after the stage: _tp_sweep_guard's check), and its tables are kept."""
    at = {q.name: i for i, q in enumerate(queries)}
    last: dict[str, int] = {}
    for i, q in enumerate(queries):
        for dep in q.requires:
            if dep in at:
                last[dep] = i
    for q in reversed(queries):  # through views, last readers first (the order is topological)
        if q.result == "step" or q.stage == "live":
            continue
        end = last.get(q.name, len(queries)) if q.result == "view" else None
        for dep in q.requires:
            if end is not None and dep in at:
                last[dep] = max(last.get(dep, end), end)
    return {
        q.name: last[q.name]
        for q in queries
        if q.result == "step" and q.stage != "live" and last.get(q.name, len(queries)) < len(queries)
    }


def _drop_read(con: duckdb.DuckDBPyConnection, last: dict[str, int], i: int) -> None:
    """Drop the step tables whose last reader (last_readers) is the query before position i."""
    for name in [n for n, at in last.items() if at == i - 1]:
        con.execute(f'DROP TABLE IF EXISTS temp.main."{name}"')


def rank_list(ranks: list[int]) -> str:
    """`ranks` as the list of an SQL `IN (...)` (NULL for none: `IN ()` does not parse)."""
    return ", ".join(str(int(r)) for r in ranks) or "NULL"


def shadow_ranks(con: duckdb.DuckDBPyConnection, ranks: list[int], tables: list[str]) -> Made:
    """TEMP views showing only `ranks`' rows of each rank table (the rank-local step's input)."""
    main = main_schema(con)
    for table in tables:
        con.execute(
            f'CREATE OR REPLACE TEMP VIEW "{table}" AS SELECT * FROM {main}."{table}" '
            f"WHERE rank IN ({rank_list(ranks)})"
        )
    return [(t, "VIEW") for t in tables]


def rank_local_step(con: duckdb.DuckDBPyConnection, staging: Staging | None = None) -> Made:
    """Compute the rank-local results of whatever canonical rows the connection shows.

    Pure: reads only the canonical tables (by their unqualified names) and `settings`; leaves
    every stored rank result (query_layer.stored("rank")) as a TEMP table of the same name (the
    caller copies them where they belong: a worker to Parquet), or, with `staging`, appends them
    to the staged tables and leaves TEMP views of them. The caller drops what it returns.
    """
    made = _create_stage(con, query_layer.closure(query_layer.of_stage("rank")), True, staging)
    over = con.execute("SELECT rank, category FROM _tp_sweep_guard ORDER BY ALL").fetchone()
    if over:
        drop_made(con, made)
        raise UserError(
            f"rank {over[0]} has more than 32,767 {over[1]} operations running at once; the time partition "
            "counts at most 32,767 overlapping operations of one category per rank (is the trace's timing "
            "broken?)"
        )
    return made


def _job_queries() -> list[query_layer.Query]:
    return [q for q in query_layer.closure(query_layer.of_stage("job")) if q.stage != "rank"]


ALIGNMENT_READS = ("jobs", "merge_jobs", "merge_coll_members")  # the job queries ranks.align_clocks reads


def job_step(con: duckdb.DuckDBPyConnection, align: bool = True) -> tuple[Made, list[str]]:
    """Align clocks, then compute the job-level results over the stored rank results (TEMP tables).

    Only what the alignment reads is created before it, as views (they see the offsets it
    sets); every other query is created once, after it: binding a query costs as much as
    running it on a small job, and a view created only to be replaced by a table is bound twice.
    Returns what it created and the alignment's notes.
    """
    from .ranks import align_clocks

    queries = _job_queries()
    early = {q.name for q in query_layer.closure([q for q in queries if q.name in ALIGNMENT_READS])}
    made = _create_stage(con, [q for q in queries if q.name in early], materialise=False)
    notes = align_clocks(con) if align else []
    tables = {q.name for q in queries if q.stage == "job" and q.kind == "view" and q.result != "view"}
    last = last_readers(queries)
    for i, q in enumerate(queries):  # then each stored one computed once, in order, as a table
        _drop_read(con, last, i)
        if q.stage == "live" or (q.name in early and q.name not in tables):
            continue
        if q.name in early:
            con.execute(f'DROP VIEW temp.main."{q.name}"')
        as_table = q.name in tables
        if q.name == replay.READER:  # the replay runs between its inputs' query and its reader
            made.append((replay.compute(con), "TABLE"))
        _run(con, q.create("table" if as_table else "view", temporary=True), q.name)
        if q.name not in early:
            made.append((q.name, "TABLE" if as_table else q.drop_keyword))
    return [(n, "TABLE" if n in tables else k) for n, k in made], notes


Progress = Callable[[int, int], None]


def refresh(
    con: duckdb.DuckDBPyConnection,
    force: bool = False,
    batch_events: int = BATCH_EVENTS,
    progress: Progress | None = None,
    say: Callable[[str], None] | None = None,
    precomputed: dict[int, dict[str, Path]] | None = None,
    seconds: dict[str, float] | None = None,
    early: Early | None = None,
) -> list[str]:
    """Bring the stored results up to date with the workspace; returns the alignment's notes.

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
    p = plan(con)
    if force:
        p.full, p.ranks, p.job, p.reason = True, sorted(p.fingerprints), True, "recompute requested"
    if not p.needed:
        return []
    with checkpoints_held(con):  # one checkpoint after the swap, not one every batch or two
        return _recompute(con, p, say, batch_events, progress, precomputed or {}, seconds, early)


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
    bound_memory(con)
    con.execute("RESET threads")
    from .workspace import settings_as_variables

    settings_as_variables(con)
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
        try:  # the cleanup (catalog queries, drops) must not run out of memory itself
            con.execute("SET memory_limit = '1GiB'")
            _drop_staged(con)
        finally:
            bound_memory(con)
        raise
    con.execute("BEGIN TRANSACTION")
    try:
        existing = _objects(con)
        rank_results = query_layer.stored("rank")
        replaced = set(rank_results) if p.kept else set()  # the stale ranks' rows replaced in them
        for name in [*rank_results, *query_layer.stored("job")]:
            if name in replaced:
                con.execute(f'DELETE FROM {main}."{name}" WHERE rank IN ({p.stale})')
                con.execute(f'INSERT INTO {main}."{name}" SELECT * FROM {main}."{STAGED}{name}"')
                con.execute(f'DROP TABLE {main}."{STAGED}{name}"')
                continue
            if existing.get(name):
                con.execute(f'DROP {existing[name].upper()} {main}."{name}"')
            con.execute(f'ALTER TABLE {main}."{STAGED}{name}" RENAME TO "{name}"')
        sets = ", ".join(f"{c} = s.{c}" for c in ALIGNED)
        con.execute(
            f'UPDATE {main}.ranks SET {sets} FROM {main}."{STAGED_CLOCKS}" s WHERE s.rank = ranks.rank'
        )
        con.execute(f'DROP TABLE {main}."{STAGED_CLOCKS}"')
        con.execute(
            f"CREATE OR REPLACE TABLE {STATE_TABLE} "
            "(rank INTEGER PRIMARY KEY, fingerprint TEXT, counts TEXT, events BIGINT)"
        )
        state = [(r, fp, p.counts.get(r, ""), p.sizes.get(r, 0)) for r, fp in p.fingerprints.items()]
        if state:
            con.execute(f"INSERT INTO {STATE_TABLE} VALUES {sql_rows(state)}")
        con.execute(f"INSERT OR REPLACE INTO meta VALUES {sql_rows(list(p.stamps.items()))}")
        con.execute("COMMIT")
    except BaseException:
        rollback(con)
        _drop_staged(con)
        raise
    for q in query_layer.of_stage("job"):  # macros over stored results, kept for users' SQL
        if q.kind == "macro":
            con.execute(q.create("view", temporary=False))
    return notes


def _drop_staged(con: duckdb.DuckDBPyConnection, keep: list[str] | None = None) -> None:
    main = main_schema(con)
    for name, kind in _objects(con).items():
        if name.startswith(STAGED) and name not in (keep or ()):
            con.execute(f'DROP {kind.upper()} {main}."{name}"')


def _usable(early: Early | None, p: Plan) -> list[int]:
    """The ranks of `early` refresh takes: all of them when they were computed under the current
    stamp and are all stale (they always are after the ingest that computed them), else none."""
    if early is None or early.failed or early.stamp != p.stamps["analysis_global"]:
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
    rank_results = query_layer.stored("rank")
    if p.kept:  # only the stale ranks' rows are staged: empty tables typed as the stored ones
        for name in rank_results:
            con.execute(f'CREATE TABLE {main}."{STAGED}{name}" AS SELECT * FROM {main}."{name}" LIMIT 0')
    created = _take_early(con, main, rank_results, early, not p.kept) or bool(p.kept)
    read = {r: precomputed[r] for r in p.ranks if r in precomputed}
    # a full recompute computes at least an empty batch: it creates the staged tables, typed
    # as the queries type them, which the workers' Parquet rows are then cast to
    computed = set(read) | set(early)
    todo = batches([r for r in p.ranks if r not in computed], p.sizes, batch_events) or (
        [] if created else [[]]
    )
    for done, batch in enumerate(todo, 1):
        made = shadow_ranks(con, batch, tables)
        try:
            made += rank_local_step(con, Staging(main, batch, create=not created and done == 1))
        finally:
            drop_made(con, made)
        if progress:
            progress(done, len(todo))
    _stage_precomputed(con, main, rank_results, read)
    seconds["rank"] = time.perf_counter() - started
    started = time.perf_counter()
    # the job step reads the new rank results under their own names, and aligns the clocks in
    # a private copy of `ranks`, written back by the swap
    made = [(name, "VIEW") for name in rank_results] + [("ranks", "TABLE")]
    for name in rank_results:
        rows = f'SELECT * FROM {main}."{STAGED}{name}"'
        if p.kept:  # with the kept ranks' stored rows (the staged tables have their columns' order)
            # the stale ranks filtered out (few); listing the kept ones (many) cost the job step
            # of one changed rank in 64 x 200k kernels 17.6 s instead of 13.4 s
            where = f"WHERE rank NOT IN ({p.stale})" if p.ranks or p.removed else ""
            rows = f'SELECT * FROM {main}."{name}" {where} UNION ALL {rows}'
        con.execute(f'CREATE OR REPLACE TEMP VIEW "{name}" AS {rows}')
    con.execute(f"CREATE OR REPLACE TEMP TABLE ranks AS SELECT * FROM {main}.ranks")
    try:
        job_made, notes = job_step(con)
        made += job_made
        for name in query_layer.stored("job"):
            con.execute(f'CREATE TABLE {main}."{STAGED}{name}" AS SELECT * FROM temp.main."{name}"')
        con.execute(
            f'CREATE TABLE {main}."{STAGED_CLOCKS}" AS SELECT rank, {", ".join(ALIGNED)} FROM temp.main.ranks'
        )
    finally:
        drop_made(con, made)
    seconds["job"] = time.perf_counter() - started
    return notes


def _take_early(
    con: duckdb.DuckDBPyConnection, main: str, names: list[str], ranks: list[int], rename: bool
) -> bool:
    """The early results of `ranks` into the staged tables: renamed to them when these do not
    exist yet (no copy), else appended. Returns whether the staged tables exist now."""
    if not ranks:
        return False
    for name in names:
        if rename:
            con.execute(f'ALTER TABLE {main}."{EARLY}{name}" RENAME TO "{STAGED}{name}"')
        else:
            con.execute(
                f'INSERT INTO {main}."{STAGED}{name}" BY NAME SELECT * FROM {main}."{EARLY}{name}" '
                f"WHERE rank IN ({rank_list(ranks)})"
            )
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
        con.execute(
            f'INSERT INTO {main}."{STAGED}{name}" BY NAME SELECT * FROM read_parquet(?::VARCHAR[]) '
            f"WHERE rank IN ({ranks})",
            [files],
        )


def compute_in_session(con: duckdb.DuckDBPyConnection) -> None:
    """Stale results on a workspace this process cannot write: compute them as TEMP tables.

    They shadow the stored tables for this connection only (the file is unchanged); the clock
    offsets stay as stored. Used when another process holds the write lock or the file is
    read-only.
    """
    from .workspace import settings_as_variables

    settings_as_variables(con)
    keep = set(query_layer.stored("rank")) | set(query_layer.stored("job"))
    made = rank_local_step(con)
    drop_made(con, [m for m in made if m[0] not in keep])
    made, _ = job_step(con, align=False)
    drop_made(con, [m for m in made if m[0] not in keep])


def tty_progress(label: str) -> tuple[Progress | None, Callable[[], None]]:
    """A rich progress bar on stderr when it is a terminal (nothing in pipes and CI)."""
    if not sys.stderr.isatty():
        return None, lambda: None
    from rich.console import Console
    from rich.progress import Progress as Bar

    bar = Bar(transient=True, console=Console(stderr=True))
    bar.start()
    task = bar.add_task(label, total=None)

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    return update, bar.stop
