"""`nsight-analyze sql`: ad-hoc DuckDB SQL on the documented tables and views."""

from __future__ import annotations

import click

from ..api import Workspace
from ..api.frames import head_sql, stream_sql
from ..clihelp import output_options
from ..render.output import emit, emit_stream
from ..store.query_layer import names_in

MAX_ROWS = 1000  # rows `--format table|markdown` shows by default (a person reads them)


@click.command("sql")
@output_options()
@click.option("--write", is_flag=True, help="Allow statements that change the workspace.")
@click.option(
    "--max-rows",
    type=click.IntRange(min=0),
    default=MAX_ROWS,
    show_default=True,
    help="table and markdown: show at most this many rows (0: all); csv and json stream every row.",
)
@click.argument("query")
def command(db: str, fmt: str, write: bool, max_rows: int, query: str) -> None:
    """Run QUERY against the workspace (read-only unless --write).

    The result streams: csv and json print every row with memory for one chunk of it, so
    `--format csv -o FILE` writes a result larger than memory.

    Python: nsight_analyze.open(DB).sql(QUERY) (a DataFrame; arrow=True: a pyarrow Table)."""
    with Workspace(db).connect(read_only=not write, needs=names_in(query)) as con:
        if fmt in ("csv", "json"):  # every row, as it arrives
            chunks = stream_sql(con, query)
            if chunks is not None:  # a statement without a result (CREATE, INSERT, ...) prints nothing
                emit_stream(chunks, fmt)
            return
        head = head_sql(con, query, max_rows or None)  # a person reads it: the first rows
    if head is not None:
        table, more = head
        emit(table, fmt)
        if more:
            print(
                f"(the first {max_rows:,} rows: the result has more; --max-rows N shows N, --max-rows 0 all, "
                "--format csv or json streams every row)"
            )
