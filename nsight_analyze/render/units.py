"""Values in human units, chosen by column name (the terminal's and Markdown's cells).

`*_ns` durations as ns/µs/ms/s, `*_bytes` and `bytes` as B/KiB/MiB/GiB, `*_pct` as %, ids as
plain integers, counts with thousands separators; timestamps (`start_ns`, `end_ns`, ...) stay
integer nanoseconds, so they can be pasted into SQL; a missing value is always `UNKNOWN`. Text is
passed through `escape.clean` (control characters shown escaped).
"""

from __future__ import annotations

from typing import Any

from ..plain import missing as _missing
from ..plain import pandas_types
from .data import jsonable
from .escape import clean

UNKNOWN = "—"  # the one marker for a missing / not applicable value in terminal output

ID_COLUMNS = {"#", "rank", "step", "pid", "tid", "device", "device_id", "stream", "stream_id", "gpu",
              "file_id", "coll_id", "correlation_id", "context_id", "slowest_rank", "worst_rank",
              "straggler_rank", "seq", "ordinal"}  # fmt: skip
TIMESTAMP_SUFFIXES = ("start_ns", "end_ns", "arrive_ns", "first_ns", "last_ns", "utc_ns", "ts_ns")
DURATION_UNITS = ((1e3, "µs"), (1e6, "ms"), (1e9, "s"))  # ascending; below 1 µs: integer ns
BYTE_UNITS = ((1 << 10, "KiB"), (1 << 20, "MiB"), (1 << 30, "GiB"), (1 << 40, "TiB"), (1 << 50, "PiB"))


def _significant(value: float) -> str:
    """4 significant digits for a value in [0, 1000), fewer decimals as it grows."""
    a = abs(value)
    decimals = 3 if a < 10 else 2 if a < 100 else 1 if a < 1000 else 0
    return f"{value:,.{decimals}f}"


def _scaled(value: float, units: tuple[tuple[float, str], ...]) -> str:
    """value in the largest unit (ascending list) it reaches; 999.96 ms becomes 1.000 s."""
    a = abs(value)
    i = max(k for k, (scale, _) in enumerate(units) if a >= scale or k == 0)
    text = _significant(value / units[i][0])
    if i + 1 < len(units) and abs(float(text.replace(",", ""))) * units[i][0] >= units[i + 1][0]:
        i += 1
        text = _significant(value / units[i][0])
    return f"{text} {units[i][1]}"


def format_duration(ns: Any) -> str:
    """Nanoseconds as ns / µs / ms / s with 4 significant digits: 324534733 -> '324.5 ms'."""
    if _missing(ns):
        return UNKNOWN
    ns = float(ns)
    if ns == 0:
        return "0"
    if abs(round(ns)) < 1000:
        return f"{ns:.0f} ns" if ns.is_integer() or abs(ns) >= 100 else f"{ns:.1f} ns"
    return _scaled(ns, DURATION_UNITS)


def format_bytes(n: Any) -> str:
    """Bytes as B / KiB / MiB / GiB: 60528471.47 -> '57.72 MiB'."""
    if _missing(n):
        return UNKNOWN
    n = float(n)
    if abs(round(n)) < 1024:
        return f"{n:.0f} B" if n.is_integer() or abs(n) >= 100 else f"{n:.1f} B"
    return _scaled(n, BYTE_UNITS)


def format_pct(value: Any) -> str:
    if _missing(value):
        return UNKNOWN
    value = float(value)
    return f"{value:.2f}%" if 0 < abs(value) < 1 else f"{value:.1f}%"


def format_number(value: Any) -> str:
    """Integers (and integral floats) with thousands separators, other floats with 2-4 decimals."""
    value = jsonable(value)
    if _missing(value):
        return UNKNOWN
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if abs(value) >= 1e15 or (value != 0 and abs(value) < 1e-4):
            return f"{value:.4g}"
        if value.is_integer():
            return f"{int(value):,}"
        if abs(value) >= 1:
            return f"{value:,.2f}"
        text = f"{value:.4f}".rstrip("0")
        return text + "0" * max(0, 2 - len(text.partition(".")[2]))
    return clean(str(value))


def format_quantity(value: Any, unit: str) -> str:
    """A value with its unit, in human units when the unit is ns or bytes ('ns (all ranks)' too)."""
    if _missing(value):
        return UNKNOWN
    head, _, rest = (unit or "").partition(" ")
    rest = f" {rest}" if rest else ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if head == "ns":
            return format_duration(value) + rest
        if head in ("B", "bytes"):
            return format_bytes(value) + rest
        if head == "%":
            return format_pct(value) + rest
    text = format_number(value)
    return f"{text} {clean(unit)}" if unit else text


def column_kind(name: str) -> str:
    """How a column's values are shown: duration | timestamp | bytes | pct | id | plain."""
    n = str(name).lower()
    if n in ID_COLUMNS or n.endswith(("_id", "_rank")):
        return "id"
    if n.endswith(TIMESTAMP_SUFFIXES) or n in ("start", "end", "ts"):
        return "timestamp"
    if n.endswith("_ns") or n == "ns":
        return "duration"
    if n.endswith("_us"):
        return "duration_us"
    if n.endswith("_ms"):
        return "duration_ms"
    if n == "bytes" or n.endswith("_bytes"):
        return "bytes"
    if n.endswith("_pct") or n == "pct":
        return "pct"
    return "plain"


def format_value(value: Any, column: str | None = None) -> str:
    """One cell for the terminal (or Markdown): human units by column name, UNKNOWN when missing."""
    pd = pandas_types()  # a Timedelta exists only once pandas is imported
    if pd is not None and isinstance(value, pd[3]):
        return format_duration(value.value)
    value = jsonable(value)
    if _missing(value):
        return UNKNOWN
    if isinstance(value, str):
        return clean(value)
    kind = column_kind(column) if column is not None else "plain"
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    if numeric and kind == "duration":
        return format_duration(value)
    if numeric and kind == "duration_us":
        return format_duration(value * 1e3)
    if numeric and kind == "duration_ms":
        return format_duration(value * 1e6)
    if numeric and kind == "bytes":
        return format_bytes(value)
    if numeric and kind == "pct":
        return format_pct(value)
    if numeric and kind in ("id", "timestamp") and float(value).is_integer():
        return str(int(value))
    if isinstance(value, (list, tuple)):
        return ", ".join(format_value(v) for v in value)
    return format_number(value)


def heading(column: str) -> str:
    """A column name as a table heading: unit suffixes dropped (the cells carry units)."""
    name = str(column)
    kind = column_kind(name)
    if kind == "duration":
        name = name[:-3] if name.lower() != "ns" else name
    elif kind in ("duration_us", "duration_ms"):
        name = name[:-3]
    elif kind == "bytes" and name.lower() != "bytes":
        name = name[:-6]
    elif kind == "pct":
        name = "%" if name.lower() == "pct" else name[:-4] + " %"
    return clean(name.replace("_", " ")) or " "
