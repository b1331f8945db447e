"""Results as data: plain-Python records and JSON (CSV: `DataFrame.to_csv` or `PlainTable.to_csv`).

JSON keeps trace text exactly (its escaping is `json.dumps`'), so a name round-trips.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..plain import jsonable
from .table import PlainTable

if TYPE_CHECKING:
    import pandas as pd


def records(df: pd.DataFrame | PlainTable) -> list[dict[str, Any]]:
    """Rows (of a DataFrame or a PlainTable) as plain-Python dicts (ints stay ints, NaN becomes
    null)."""
    rows = df.records() if isinstance(df, PlainTable) else df.astype(object).to_dict("records")
    return [{k: jsonable(v) for k, v in row.items()} for row in rows]


def to_json(obj: Any) -> str:
    """JSON text (indented; NaN, infinities and pandas/numpy values as `jsonable` makes them, at
    any depth: json.dumps writes a float it can hold as NaN or Infinity, which is not JSON)."""
    return json.dumps(jsonable(obj), indent=2, default=jsonable)
