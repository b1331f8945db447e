"""The two analysis steps: the rank-local step over a batch of ranks' canonical rows, and the
job-level step over every rank's stored results (docs/architecture.md, "The two analysis steps").

Each creates its queries (queries/*/*.sql, in the query layer's order) as TEMP objects of the
connection, or appends a batch's stored results to the staged tables; the caller (the package's
`refresh`, a worker's `rank_task.map_batch`, `rank_pipeline`) decides where they go.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import duckdb

from .. import replay
from ..errors import UserError
from ..store import query_layer
from ..store.duck import main_schema, out_of_memory
from ..store.query_layer import statements

SQL = statements("analysis/steps")

STAGED = "_staged_"  # prefix of the tables a recompute fills before it swaps them in
# Canonical rows per rank batch. Each batch costs about 0.25 s beyond its rows (binding some 80
# queries): at 64 ranks x 200k kernels (checkpoints held), batches of 4 M rows (8 ranks) took the
# ingest 58.2-59.7 s against 63.6-64.9 s for 2 M, at the same peak (the cap bounds it: bound_memory).
BATCH_EVENTS = 4_000_000
ALIGNMENT_READS = ("jobs", "merge_jobs", "merge_coll_members")  # the job queries ranks.align_clocks reads
# Of those, the ones that read no column align_clocks writes (ranks' job, clock_offset_ns,
# alignment_method; merge_jobs reads the ranks' files, sizes and session starts, jobs merge_jobs and
# the hosts): computed once, as tables, before it. As views the alignment's queries computed
# merge_jobs six times and jobs five on the two Kineto ranks of trace_filter.
UNALIGNED = ("merge_jobs", "jobs")


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
    inputs: Iterable[str] = (),
    as_tables: Iterable[str] = (),
) -> Made:
    """Create a stage's queries as TEMP objects, in order; stored/step ones as tables if asked
    (the stored ones into the staged tables instead, with `staging`), those named in `as_tables`
    as tables in any case. A step table is dropped
    as soon as the last query that reads it has run. The stored results named in `inputs` are
    read as stored, not computed (with `staging`: the batch's rows of them)."""
    made: Made = []
    last = last_readers(queries) if materialise else {}
    for i, q in enumerate(queries):
        _drop_read(con, last, i)
        if q.stage == "live":  # the workspace's own views and macros (they read the shadows)
            continue
        if q.result == "stored" and q.name in inputs:
            if staging is not None:
                source = f'{staging.main}."{q.name}"'
                con.execute(SQL.sql("ranks_view", name=q.name, source=source, ranks=rank_list(staging.ranks)))
                made.append((q.name, "VIEW"))
            continue
        if staging is not None and q.result == "stored":
            table = f'{staging.main}."{staging.prefix}{q.name}"'
            _run(con, q.into(table, create=staging.create), q.name)
            con.execute(SQL.sql("ranks_view", name=q.name, source=table, ranks=rank_list(staging.ranks)))
            made.append((q.name, "VIEW"))
            continue
        as_table = (materialise and q.result in ("stored", "step")) or q.name in as_tables
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
        con.execute(SQL.sql("ranks_view", name=table, source=f'{main}."{table}"', ranks=rank_list(ranks)))
    return [(t, "VIEW") for t in tables]


def rank_queries(tables: Iterable[str] | None = None, inputs: Iterable[str] = ()) -> list[query_layer.Query]:
    """The rank-local queries that compute the stored rank results in `tables` (None: all) from
    the canonical rows and the stored results in `inputs`, in load order; with the partition's
    sweep, its overflow check (read after the stage)."""
    wanted = [q for q in query_layer.of_stage("rank") if tables is None or q.name in set(tables)]
    queries = query_layer.closure(wanted, stop=inputs)
    if tables is not None and any(q.name == "_tp_segments" for q in queries):
        guard = [q for q in query_layer.layer() if q.name == "_tp_sweep_guard"]
        queries = query_layer.closure([*wanted, *guard], stop=inputs)
    return queries


def rank_local_step(
    con: duckdb.DuckDBPyConnection,
    staging: Staging | None = None,
    tables: Iterable[str] | None = None,
    inputs: Iterable[str] = (),
) -> Made:
    """Compute the rank-local results of whatever canonical rows the connection shows.

    Pure: reads only the canonical tables (by their unqualified names) and `settings`; leaves
    every stored rank result of `tables` (None: all of query_layer.stored("rank")) as a TEMP
    table of the same name (the caller copies them where they belong: a worker to Parquet), or,
    with `staging`, appends them to the staged tables and leaves TEMP views of them. Stored
    results named in `inputs` are read as stored (they are computed already). The caller drops
    what it returns.
    """
    queries = rank_queries(tables, inputs)
    made = _create_stage(con, queries, True, staging, inputs)
    if not any(name == "_tp_sweep_guard" for name, _ in made):
        return made
    over = con.execute("SELECT rank, category FROM _tp_sweep_guard ORDER BY ALL").fetchone()
    if over:
        drop_made(con, made)
        raise UserError(
            f"rank {over[0]} has more than 32,767 {over[1]} operations running at once; the time partition "
            "counts at most 32,767 overlapping operations of one category per rank (is the trace's timing "
            "broken?)"
        )
    return made


def _job_queries(tables: Iterable[str] | None = None, inputs: Iterable[str] = ()) -> list[query_layer.Query]:
    """The job queries that compute the stored job results in `tables` (None: all), without the
    stored results named in `inputs` (read as stored)."""
    wanted = [q for q in query_layer.of_stage("job") if tables is None or q.name in set(tables)]
    skip = set(inputs)
    return [
        q
        for q in query_layer.closure(wanted, stop=skip)
        if q.stage != "rank" and not (q.result == "stored" and q.name in skip)
    ]


def job_step(
    con: duckdb.DuckDBPyConnection,
    align: bool = True,
    tables: Iterable[str] | None = None,
    inputs: Iterable[str] = (),
) -> tuple[Made, list[str]]:
    """Align clocks, then compute the job-level results over the stored rank results (TEMP tables):
    those in `tables` (None: all), reading the stored ones in `inputs` as they are.

    Only what the alignment reads is created before it, as views (they see the offsets it
    sets; those that read none of what it writes, UNALIGNED, as tables); every other query is
    created once, after it: binding a query costs as much as running it on a small job, and a
    view created only to be replaced by a table is bound twice.
    Returns what it created and the alignment's notes.
    """
    from ..ranks import align_clocks

    queries = _job_queries(tables, inputs)
    early = {q.name for q in query_layer.closure([q for q in queries if q.name in ALIGNMENT_READS])}
    tables = {q.name for q in queries if q.stage == "job" and q.kind == "view" and q.result != "view"}
    fixed = tables & set(UNALIGNED)
    made = _create_stage(con, [q for q in queries if q.name in early], materialise=False, as_tables=fixed)
    notes = align_clocks(con) if align else []
    last = last_readers(queries)
    for i, q in enumerate(queries):  # then each stored one computed once, in order, as a table
        _drop_read(con, last, i)
        if q.stage == "live" or (q.name in early and (q.name not in tables or q.name in fixed)):
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
