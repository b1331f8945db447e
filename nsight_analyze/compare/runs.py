"""Each run's partition per step window, its step count and its imbalance, side by side.

Cross-run SQL over the views of both sides' stored results (sides.py `_side_views`), on the common ranks.
"""

from __future__ import annotations

import math
from typing import Any

import duckdb

from ..duck import plain_records
from .settings import COMPANIONS, MEMORY, MEMORY_PARTS, PARTS, SIDES
from .sides import _total


def _partition(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """Mean partition per step window, per common rank and summed over ranks, before/after/delta.
    The memory split (MEMORY) of a side whose stored partition predates it (a workspace that could
    not be brought up to date) is unknown there (None), never 0."""
    cols = PARTS + COMPANIONS + MEMORY
    for side in SIDES:
        have = {str(r[0]) for r in con.execute(f"DESCRIBE {side}_tp").fetchall()}
        avgs = ", ".join(f"avg({c})::DOUBLE AS {c}" if c in have else f"NULL::DOUBLE AS {c}" for c in cols)
        con.execute(f"""
            CREATE OR REPLACE TEMP TABLE {side}_part AS
            SELECT rank, count(*) AS windows, {avgs}
            FROM {side}_tp t
            WHERE rank IN (SELECT rank FROM cmp_common)
              AND (step IS NOT NULL OR NOT EXISTS (
                    SELECT 1 FROM {side}_tp u WHERE u.rank = t.rank AND u.step IS NOT NULL))
            GROUP BY rank""")
    sel = ", ".join(f"b.{c} AS b_{c}, a.{c} AS a_{c}" for c in cols)
    rows = plain_records(
        con, f"SELECT b.rank, {sel} FROM before_part b JOIN after_part a USING (rank) ORDER BY rank"
    )

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
    n = con.execute(f"""SELECT max(c) FROM (SELECT count(step) AS c FROM {side}_tp
                        WHERE rank IN (SELECT rank FROM cmp_common) GROUP BY rank)""").fetchone()[0]
    return max(int(n or 0), 1)


def _imbalance(con: duckdb.DuckDBPyConnection, side: str) -> dict[str, Any]:
    """The job-wide imbalance (whole capture) and straggler verdict of one run."""
    imb = plain_records(
        con, f"SELECT ratio, slowest_rank, balanced, wait_gpu_ns FROM {side}_imb WHERE step IS NULL"
    )
    rr = plain_records(con, f"SELECT rank, verdict, straggler FROM {side}_rr ORDER BY rank")
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
