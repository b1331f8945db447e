"""Values as plain JSON data: what DuckDB and pandas hand back, turned into Python's own types.

Why one module: the findings (rules/) and every renderer (render/) turn query results into JSON;
one definition keeps their outputs agreeing (numpy scalars and arrays unwrapped, NaN, NA and NaT
as null, timestamps as ISO text, durations as nanoseconds, bytes as hex).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd


def jsonable(value: Any) -> Any:
    """`value` as JSON data (lists recursively)."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    if isinstance(value, pd.Timedelta):
        return int(value.value)  # nanoseconds
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if hasattr(value, "tolist"):  # numpy arrays (a LIST column) and scalars
        return jsonable(value.tolist())
    if hasattr(value, "item"):
        return jsonable(value.item())
    return value
