"""`nsight-analyze sql`: ad-hoc DuckDB SQL on the documented tables and views."""

from __future__ import annotations

import click
import duckdb

from ..clihelp import db_option, format_option
from ..duck import out_of_memory
from ..errors import UserError
from ..render import emit
from ..workspace import open_workspace


@click.command("sql")
@db_option
@format_option("table", "csv", "json")
@click.option("--write", is_flag=True, help="Allow statements that change the workspace.")
@click.argument("query")
def command(db: str, fmt: str, write: bool, query: str) -> None:
    """Run QUERY against the workspace (read-only unless --write)."""
    con = open_workspace(db, read_only=not write, must_exist=True)
    try:
        rel = con.execute(query)
        if rel.description is None:
            return
        df = rel.df()
    except duckdb.OutOfMemoryException:
        raise out_of_memory("the query") from None
    except duckdb.Error as exc:
        text = str(exc).splitlines()[0]
        if "read-only" in text.lower() or "read only" in text.lower():
            raise UserError(f"the workspace is opened read-only; add --write to change it ({text})") from None
        raise UserError(f"SQL error: {text}") from None
    finally:
        con.close()
    emit(df, fmt)
