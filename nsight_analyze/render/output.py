"""A result in the format the user chose: `--format table|json|csv|markdown`."""

from __future__ import annotations

import pandas as pd

from .data import records, to_json
from .markdown import markdown_table
from .terminal import print_table


def emit(df: pd.DataFrame, fmt: str, title: str | None = None) -> None:
    """Print a result in the user's chosen format (table, json, csv or markdown)."""
    if fmt == "json":
        print(to_json(records(df)))
    elif fmt == "csv":
        print(df.to_csv(index=False), end="")
    elif fmt == "markdown":
        print(markdown_table(df, title))
    else:
        print_table(df, title)
