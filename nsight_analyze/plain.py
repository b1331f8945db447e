"""Values as plain JSON data: what DuckDB and pandas hand back, turned into Python's own types.

Why one module: the findings (rules/) and every renderer (render/) turn query results into JSON;
one definition keeps their outputs agreeing (numpy scalars and arrays unwrapped, NaN, NA and NaT
as null (so is an infinite float), timestamps (pandas' and datetime's) as ISO text, durations as
nanoseconds, bytes as hex).

pandas is never imported here: a pandas value (NA, NaT, Timestamp, Timedelta) can only exist once
something else has imported pandas, so the checks read it from `sys.modules` (a command that
prints plain rows, such as `summary`, stays without pandas).
"""

from __future__ import annotations

import datetime
import math
import sys
from typing import Any


def pandas_types() -> tuple[Any, Any, type, type] | None:
    """pandas' (NA, NaT, Timestamp, Timedelta) once pandas is imported; None before, and while
    another thread is still importing it (its module is in sys.modules half made): no value
    can be of those types before they exist."""
    pd = sys.modules.get("pandas")
    if pd is None:
        return None
    try:
        return pd.NA, pd.NaT, pd.Timestamp, pd.Timedelta
    except AttributeError:
        return None


def missing(value: Any) -> bool:
    """None, NaN, or pandas' NA / NaT: a value that is not there."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    pd = pandas_types()
    return pd is not None and (value is pd[0] or value is pd[1])


def jsonable(value: Any) -> Any:
    """`value` as JSON data (lists and dicts recursively). An infinite float is null as NaN is:
    JSON has no such number, and `json.dumps` wrote `Infinity`, which JSON readers (jq, browsers,
    Go, Rust) reject."""
    if missing(value):
        return None
    if isinstance(value, float) and math.isinf(value):
        return None
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    pd = pandas_types()
    if pd is not None:
        if isinstance(value, pd[2]):  # Timestamp
            return value.isoformat()
        if isinstance(value, pd[3]):  # Timedelta
            return int(value.value)  # nanoseconds
    if isinstance(value, (datetime.date, datetime.time)):  # DuckDB's own (fetchall), as pandas' above
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if hasattr(value, "tolist"):  # numpy arrays (a LIST column) and scalars
        return jsonable(value.tolist())
    if hasattr(value, "item"):
        return jsonable(value.item())
    return value
