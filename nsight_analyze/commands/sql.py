"""`nsight-analyze sql`: ad-hoc DuckDB SQL on the documented tables and views."""

from __future__ import annotations

import click

from ..api import Workspace
from ..clihelp import output_options
from ..render.output import emit


@click.command("sql")
@output_options()
@click.option("--write", is_flag=True, help="Allow statements that change the workspace.")
@click.argument("query")
def command(db: str, fmt: str, write: bool, query: str) -> None:
    """Run QUERY against the workspace (read-only unless --write).

    Python: nsight_analyze.open(DB).sql(QUERY) (a DataFrame; arrow=True: a pyarrow Table)."""
    df = Workspace(db).sql(query, write=write)
    if df is not None:  # a statement without a result (CREATE, INSERT, ...) prints nothing
        emit(df, fmt)
