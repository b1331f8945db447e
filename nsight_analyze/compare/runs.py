"""Each run's partition per step window, its step count and its imbalance, side by side.

Cross-run SQL over the views of both sides' stored results (sides.py `_side_views`), on the common ranks.
"""

from __future__ import annotations

import math
from typing import Any

import duckdb

from ..store.duck import plain_records
from ..store.query_layer import statements
from .settings import COMPANIONS, MEMORY, MEMORY_PARTS, PARTS, SIDES
from .sides import _total

SQL = statements("compare/runs")


def _partition(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """Mean partition per step window, per common rank and summed over ranks, before/after/delta.
    The memory split (MEMORY) of a side whose stored partition predates it (a workspace that could
    not be brought up to date) is unknown there (None), never 0."""
    cols = PARTS + COMPANIONS + MEMORY
    for side in SIDES:
        tp, part = f"{side}_tp", f"{side}_part"
        have = {str(r[0]) for r in con.execute(SQL.sql("partition_columns", tp=tp)).fetchall()}
        present = "[" + ", ".join(f"'{c}'" for c in cols if c in have) + "]"  # column names, as data
        con.execute(SQL.sql("partition_means", part=part, present=present, tp=tp))
        for c in cols:
            if c not in have:
                con.execute(SQL.sql("partition_unknown_column", part=part, column=c))
    rows = plain_records(con, SQL["partition_side_by_side"])

    def block(row: dict[str, Any], prefix: str) -> dict[str, Any]:
        d = {c: math.nan if row[prefix + c] is None else float(row[prefix + c]) for c in cols}
        d.update({c: None for c in MEMORY if row[prefix + c] is None})  # unknown, not NaN
        d["overlap_pct"] = 100.0 * d["comms_hidden_ns"] / d["comms_total_ns"] if d["comms_total_ns"] else None
        return d

    def triple(row: dict[str, Any]) -> dict[str, Any]:
        b, a = block(row, "b_"), block(row, "a_")
        delta = {c: None if a[c] is None or b[c] is None else a[c] - b[c] for c in cols}
        delta["overlap_pct"] = (
            None
            if a["overlap_pct"] is None or b["overlap_pct"] is None
            else a["overlap_pct"] - b["overlap_pct"]
        )
        return {"before": b, "after": a, "delta": delta}

    def summed(key: str) -> float | None:
        """The sum over ranks; a memory split unknown on some rank is unknown in the total."""
        if key[2:] in MEMORY and any(r[key] is None for r in rows):  # key: b_<column> / a_<column>
            return None
        return _total(r[key] for r in rows)

    total = triple({k: summed(k) for k in rows[0] if k != "rank"}) if rows else None
    return {
        "unit": "ns per step window (mean over the rank's windows); total = sum over common ranks",
        "parts": list(PARTS),
        "memory_parts": list(MEMORY_PARTS),
        "per_rank": [{"rank": int(r["rank"]), **triple(r)} for r in rows],
        "total": total,
    }


def _n_steps(con: duckdb.DuckDBPyConnection, side: str) -> int:
    n = con.execute(SQL.sql("step_count", tp=f"{side}_tp")).fetchone()[0]
    return max(int(n or 0), 1)


def _imbalance(con: duckdb.DuckDBPyConnection, side: str) -> dict[str, Any]:
    """The job-wide imbalance (whole capture) and straggler verdict of one run."""
    imb = plain_records(con, SQL.sql("whole_capture_imbalance", imb=f"{side}_imb"))
    rr = plain_records(con, SQL.sql("rank_verdicts", rr=f"{side}_rr"))
    out: dict[str, Any] = {"ratio": None, "slowest_rank": None, "balanced": None, "wait_gpu_ns": None}
    if imb:
        r = imb[0]
        out = {
            "ratio": _nan_is_none(r["ratio"]),
            "slowest_rank": None if r["slowest_rank"] is None else int(r["slowest_rank"]),
            "balanced": None if r["balanced"] is None else bool(r["balanced"]),
            "wait_gpu_ns": None if r["wait_gpu_ns"] is None else int(r["wait_gpu_ns"]),
        }
    out["verdict"] = str(rr[0]["verdict"]) if rr and rr[0]["verdict"] is not None else None
    out["straggler_ranks"] = [int(r["rank"]) for r in rr if r["straggler"]]
    return out


def _nan_is_none(value: float | None) -> float | None:
    """A float, None for NULL and NaN (a DataFrame's missing value was NaN)."""
    return None if value is None or value != value else float(value)
