"""A result in the format the user chose: `--format table|json|csv|markdown`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .data import records, to_json
from .markdown import markdown_table
from .table import PlainTable
from .terminal import print_table

if TYPE_CHECKING:
    import pandas as pd


def emit(df: pd.DataFrame | PlainTable, fmt: str, title: str | None = None) -> None:
    """Print a result (a DataFrame or a PlainTable) in the user's chosen format (table, json, csv
    or markdown); a PlainTable is printed without importing pandas."""
    if fmt == "json":
        print(to_json(records(df)))
    elif fmt == "csv":
        print(df.to_csv() if isinstance(df, PlainTable) else df.to_csv(index=False), end="")
    elif fmt == "markdown":
        print(markdown_table(df, title))
    else:
        print_table(df, title)
