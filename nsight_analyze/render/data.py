"""Results as data: plain-Python records and JSON (CSV is pandas' own `to_csv`).

JSON keeps trace text exactly (its escaping is `json.dumps`'), so a name round-trips.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd


def jsonable(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    if isinstance(value, pd.Timedelta):
        return int(value.value)  # nanoseconds
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if hasattr(value, "tolist") and getattr(value, "ndim", 0):  # a LIST column's numpy array
        return [jsonable(v) for v in value.tolist()]
    if hasattr(value, "item"):
        return value.item()
    return value


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """DataFrame rows as plain-Python dicts (ints stay ints, NaN becomes null)."""
    return [{k: jsonable(v) for k, v in row.items()} for row in df.astype(object).to_dict("records")]


def to_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, default=jsonable)
