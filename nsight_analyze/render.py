"""Render tabular results for the terminal (rich on a TTY, plain text otherwise), CSV or JSON."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import pandas as pd


def _jsonable(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return value


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """DataFrame rows as plain-Python dicts (ints stay ints, NaN becomes null)."""
    return [{k: _jsonable(v) for k, v in row.items()} for row in df.astype(object).to_dict("records")]


def to_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, default=_jsonable)


def format_value(value: Any) -> str:
    value = _jsonable(value)
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def table_text(df: pd.DataFrame, title: str | None = None) -> str:
    """Plain aligned text, for pipes and CI logs."""
    cols = [str(c) for c in df.columns]
    rows = [[format_value(v) for v in row] for row in df.astype(object).itertuples(index=False)]
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(cols)]
    lines = [title] if title else []
    lines.append("  ".join(c.ljust(w) for c, w in zip(cols, widths)))
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(v.rjust(w) if _numeric(v) else v.ljust(w) for v, w in zip(r, widths)))
    return "\n".join(lines)


def _numeric(text: str) -> bool:
    return bool(text) and text.replace(",", "").replace(".", "").replace("-", "").replace("%", "").isdigit()


def print_table(df: pd.DataFrame, title: str | None = None) -> None:
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title)
        for col in df.columns:
            table.add_column(str(col), justify="right" if pd.api.types.is_numeric_dtype(df[col]) else "left")
        for row in df.astype(object).itertuples(index=False):
            table.add_row(*[format_value(v) for v in row])
        Console().print(table)
    else:
        print(table_text(df, title))


def emit(df: pd.DataFrame, fmt: str, title: str | None = None) -> None:
    """Print a result in the user's chosen format."""
    if fmt == "json":
        print(to_json(records(df)))
    elif fmt == "csv":
        print(df.to_csv(index=False), end="")
    else:
        print_table(df, title)
