"""The API's functions on an open DuckDB connection: what both the `Workspace` methods and the
commands call, so that `nsight-analyze X --format json` and `ws.X()` share one implementation.

Why apart from api/__init__.py: it is the user-facing object (its methods open and close the
workspace); these are the pieces that read an open connection and shape the result (the ranks
document as plain rows, SQL with one-line errors, MFU as a DataFrame). Heavy imports (duckdb,
pandas) stay inside the functions: `import nsight_analyze` stays light.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..store.query_layer import statements

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

    from ..render.table import PlainTable

SQL = statements("api/frames")


def _fetch(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    """Run one statement, its rows as dicts (`ranks` imports no pandas); a missing view is a stale
    or partial workspace, said in one line."""
    from ..store.duck import fetch_records

    return fetch_records(
        con, sql, "this workspace lacks a view the rank merger needs ({missing}); re-run ingest"
    )


def rank_report(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """What `nsight-analyze ranks` shows, as lists of row dicts: {jobs, ranks, alignment, verdict,
    partial, attribution}.

    `ranks`: one row per rank (the stored rank_rollup: clock offset and residuals, compute_ns,
    wait_suffered_ns, wait_caused_ns, times_slowest, times_last, cost_ns, straggler); `verdict`:
    one row per job (persistent / rotating / balanced, the straggler and its cost); `alignment`:
    per job and host, how the clocks were aligned; `partial`: collective instances with fewer
    participants than their communicator.
    """
    from ..no_data import require_ranks

    require_ranks(con, "align and compare ranks")
    rows = _fetch(con, "SELECT * FROM rank_rollup ORDER BY rank")
    partial = _fetch(con, SQL["partial_collectives"])
    return {
        "ranks": rows,
        # from the (scoped) imbalance, not the stored merge_straggler_verdict: a job without
        # imbalance rows has no row there, but `--job N` of it shows its verdict as unknown
        "verdict": _fetch(con, "SELECT * FROM merge_verdict_of('imbalance')"),
        "alignment": _fetch(con, "SELECT * FROM alignment_quality ORDER BY job, host"),
        "jobs": _fetch(con, "SELECT * FROM jobs ORDER BY job"),
        "partial": int(partial[0]["n"]),
        "attribution": _attribution(con),
    }


def _attribution(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Per rank and step (step None = whole job): its excess over the median rank by cause."""
    from ..errors import UserError
    from ..whatif import attribution

    try:
        return attribution(con, steps=True)
    except UserError:  # a workspace computed before attribution existed
        return []


def rank_report_json(report: dict[str, Any]) -> dict[str, Any]:
    """The stable JSON document of `nsight-analyze ranks --format json`."""
    rows, verdict = report["ranks"], report["verdict"]
    return {
        "jobs": [_jsonable_row(r) for r in report["jobs"]],
        "ranks": [_jsonable_row(r) for r in rows],
        "alignment": [_jsonable_row(r) for r in report["alignment"]],
        "verdict": _jsonable_row(verdict[0]) if verdict else None,  # the first job's
        "verdicts": [_jsonable_row(r) for r in verdict],
        "unmatched_nccl_kernels": column_total(rows, "unmatched"),
        "peer_unknown_kernels": column_total(rows, "peer_unknown"),
        "incomplete_nccl_kernels": column_total(rows, "incomplete"),
        "partial_collectives": report["partial"],
        # why each rank is slow (docs/whatif.md): whole-job rows, then per step
        "attribution": [_jsonable_row(r) for r in report.get("attribution", []) if r["step"] is None],
        "attribution_by_step": [
            _jsonable_row(r) for r in report.get("attribution", []) if r["step"] is not None
        ],
    }


def column_total(rows: list[dict[str, Any]], column: str) -> int:
    """The sum of one count column of the rank rows (a missing value counts 0)."""
    return int(sum(r[column] or 0 for r in rows))


def _jsonable_row(row: dict[str, Any]) -> dict[str, Any]:
    from ..render.data import jsonable

    return {k: jsonable(v) for k, v in row.items()}


SQL_CHUNK_VECTORS = 50  # DuckDB vectors (2,048 rows) per streamed chunk: ~100k rows


@contextmanager
def sql_errors(what: str = "the query") -> Iterator[None]:
    """DuckDB errors of a user's SQL as one line (UserError): out of memory names `what` and the
    cap, a read-only refusal says how to write."""
    import duckdb

    from ..errors import UserError
    from ..store.duck import out_of_memory

    try:
        yield
    except duckdb.OutOfMemoryException:
        raise out_of_memory(what) from None
    except duckdb.Error as exc:
        text = str(exc).splitlines()[0]
        if "read-only" in text.lower() or "read only" in text.lower():
            raise UserError(f"the workspace is opened read-only; add --write to change it ({text})") from None
        raise UserError(f"SQL error: {text}") from None


def _execute(con: duckdb.DuckDBPyConnection, query: str) -> duckdb.DuckDBPyConnection:
    """`con.execute(query)`, refusing SQL without a statement (empty, `;`, only comments), for
    which DuckDB returns None and the caller failed with an AttributeError."""
    from ..errors import UserError

    if not isinstance(query, str):
        raise TypeError(f"the SQL must be a string, not {type(query).__name__}")
    _refuse_downloads(query)
    result = con.execute(query)
    if result is None:
        raise UserError(
            "the SQL holds no statement (empty or only comments): give one, e.g. 'SELECT * FROM ranks'"
        )
    return result


# INSTALL / FORCE INSTALL / UPDATE EXTENSIONS, after any leading comments: DuckDB downloads
_DOWNLOADS = re.compile(
    r"(?:\s|--[^\n]*(?:\n|\Z)|/\*.*?\*/)*(?:(?:force\s+)?install|update\s+extensions)\b", re.I | re.S
)


def _refuse_downloads(query: str) -> None:
    """Refuse statements that download DuckDB extensions. Why: the tool never uses the network at
    run time; on an air-gapped cluster such a statement waits on a connection that never comes,
    and elsewhere it fetches code a user did not mean this tool to fetch. LOAD of an extension
    already installed stays allowed."""
    import duckdb

    from ..errors import UserError

    try:
        statements = duckdb.extract_statements(query)
    except duckdb.Error:
        return  # DuckDB's own parse error follows, in one line
    for statement in statements:
        if _DOWNLOADS.match(statement.query):
            raise UserError(
                "nsight-analyze does not download DuckDB extensions (no network at run time): install "
                "the extension with the duckdb shell where a network is, then LOAD it here"
            )


def run_sql(con: duckdb.DuckDBPyConnection, query: str, arrow: bool = False, what: str = "the query"):
    """Run one statement: its result as a DataFrame (Arrow table), None when it returns no rows
    (CREATE, INSERT, ...). A DuckDB error is one line (UserError), a read-only refusal says how."""
    with sql_errors(what):
        rel = _execute(con, query)
        if rel.description is None:
            return None
        if not arrow:
            return rel.df()
        return rel.to_arrow_table() if hasattr(rel, "to_arrow_table") else rel.fetch_arrow_table()


# DuckDB types whose fetchall values the renderers show as they show the DataFrame's column:
# integers, floats, text, booleans, timestamps and lists of them; DECIMAL and HUGEINT become
# floats, as `.df()` makes them (DATE, INTERVAL, BLOB, UUID, STRUCT, ... go through DataFrames)
_PLAIN_TYPE = re.compile(
    r"^(BOOLEAN|U?(TINY|SMALL|BIG|HUGE)?INT(EGER)?|FLOAT|DOUBLE|VARCHAR|TIMESTAMP|DECIMAL\(\d+,\d+\))(\[\])*$"
)


def head_sql(
    con: duckdb.DuckDBPyConnection, query: str, max_rows: int | None, what: str = "the query"
) -> tuple[PlainTable, bool] | None:
    """Run one statement: None when it returns no rows, else its first `max_rows` rows (None: all)
    and whether the result has more, reading no further than that (a table of the first rows of
    a 100 M-row result must not compute the rest).

    Why not stream_sql's DataFrames: `sql`'s table is what a person looks at, and importing pandas
    was half of `sql "SELECT 1"`. Where every column is of a type the renderers show alike from
    either (_PLAIN_TYPE), the rows are `fetchmany` rows; otherwise DataFrame chunks, as before."""
    from ..render.table import PlainTable, as_plain
    from ..store.duck import floated

    with sql_errors(what):
        described = _execute(con, query).description
    if described is None:
        return None
    limit = None if max_rows is None else max_rows + 1  # one more: whether the result has more
    types = [str(d[1]) for d in described]
    if all(_PLAIN_TYPE.match(t) for t in types):
        with sql_errors(what):
            rows = con.fetchall() if limit is None else con.fetchmany(limit)
        table = PlainTable.from_rows(described, floated(described, rows))
    else:
        table = as_plain(_head_frame(con, limit, what))
    more = limit is not None and len(table) == limit
    if more:
        table.rows = table.rows[:max_rows]
    return table, more


def _head_frame(con: duckdb.DuckDBPyConnection, limit: int | None, what: str) -> pd.DataFrame:
    """The first `limit` rows of the executed result (None: all) as one DataFrame, read in chunks."""
    import pandas as pd

    kept, n = [], 0
    for df in _df_chunks(con, what):
        kept.append(df)
        n += len(df)
        if limit is not None and n >= limit:
            break
    head = pd.concat(kept, ignore_index=True) if len(kept) > 1 else kept[0]
    return head if limit is None else head.iloc[:limit]


def stream_sql(
    con: duckdb.DuckDBPyConnection, query: str, what: str = "the query"
) -> Iterator[pd.DataFrame] | None:
    """Run one statement: None when it returns no rows, else its result as DataFrames of about
    100k rows each, fetched from DuckDB as they are read (the first one always, empty for an empty
    result: it carries the columns). Why: `sql "SELECT * FROM kernels"` of a large job held the
    whole result, then its rendering, in memory (100 M rows: 24 GB, killed by the kernel); read
    this way memory stays at one chunk, and a reader that stops early stops the query."""
    with sql_errors(what):
        if _execute(con, query).description is None:
            return None
    return _df_chunks(con, what)


def _df_chunks(con: duckdb.DuckDBPyConnection, what: str) -> Iterator[pd.DataFrame]:
    """The executed result in DataFrames of about 100k rows: the first one always (empty for an
    empty result: it carries the columns), then until the result ends."""
    first = True
    while True:
        with sql_errors(what):
            df = con.fetch_df_chunk(SQL_CHUNK_VECTORS)
        if first or len(df):
            yield df
        if not len(df):
            return
        first = False


def mfu_frame(summary: dict[str, Any]) -> pd.DataFrame:
    """The per-step rows of an MFU summary; the whole-capture values in `.attrs`."""
    import pandas as pd

    df = pd.DataFrame(
        summary["per_step"], columns=["step", "ranks", "window_ns_max", "mfu", "hfu", "coverage_pct"]
    )
    df.attrs.update({k: v for k, v in summary.items() if k != "per_step"})
    return df
