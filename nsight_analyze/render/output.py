"""A result in the format the user chose: `--format table|json|csv|markdown`."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..plain import jsonable
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


def emit_stream(chunks: Iterable[pd.DataFrame], fmt: str) -> None:
    """Print a result that arrives in chunks (api.frames.stream_sql) as csv or json: every row as
    it arrives, the same text `emit` prints for the whole result, holding one chunk at a time.
    (table and markdown are read by a person: `sql` prints their first rows, api.frames.head_sql.)"""
    if fmt == "csv":
        for i, df in enumerate(chunks):
            print(df.to_csv(index=False, header=i == 0), end="")
        return
    if fmt != "json":
        raise ValueError(f"emit_stream prints csv or json, not {fmt}")
    opened = False  # the text of json.dumps(rows, indent=2), written row by row
    for df in chunks:
        for row in records(df):
            text = json.dumps(row, indent=2, default=jsonable).replace("\n", "\n  ")
            print(("[\n  " if not opened else ",\n  ") + text, end="")
            opened = True
    print("\n]" if opened else "[]")
