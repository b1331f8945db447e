"""Each run's partition per step window, its step count and its imbalance, side by side.

Cross-run SQL over the views of both sides' stored results (sides.py `_side_views`), on the common ranks.
"""

from __future__ import annotations

from typing import Any

import duckdb
import pandas as pd

from .settings import COMPANIONS, PARTS, SIDES
from .sides import _df


def _partition(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """Mean partition per step window, per common rank and summed over ranks, before/after/delta."""
    cols = PARTS + COMPANIONS
    for side in SIDES:
        avgs = ", ".join(f"avg({c})::DOUBLE AS {c}" for c in cols)
        con.execute(f"""
            CREATE OR REPLACE TEMP TABLE {side}_part AS
            SELECT rank, count(*) AS windows, {avgs}
            FROM {side}_tp t
            WHERE rank IN (SELECT rank FROM cmp_common)
              AND (step IS NOT NULL OR NOT EXISTS (
                    SELECT 1 FROM {side}_tp u WHERE u.rank = t.rank AND u.step IS NOT NULL))
            GROUP BY rank""")
    sel = ", ".join(f"b.{c} AS b_{c}, a.{c} AS a_{c}" for c in cols)
    per = _df(con, f"SELECT b.rank, {sel} FROM before_part b JOIN after_part a USING (rank) ORDER BY rank")

    def block(row: dict[str, Any], prefix: str) -> dict[str, Any]:
        d = {c: float(row[prefix + c]) for c in cols}
        d["overlap_pct"] = 100.0 * d["comms_hidden_ns"] / d["comms_total_ns"] if d["comms_total_ns"] else None
        return d

    def triple(row: dict[str, Any]) -> dict[str, Any]:
        b, a = block(row, "b_"), block(row, "a_")
        delta = {c: a[c] - b[c] for c in cols}
        delta["overlap_pct"] = (
            None
            if a["overlap_pct"] is None or b["overlap_pct"] is None
            else a["overlap_pct"] - b["overlap_pct"]
        )
        return {"before": b, "after": a, "delta": delta}

    rows = per.to_dict("records")
    total = triple({k: per[k].sum() for k in per.columns if k != "rank"}) if rows else None
    return {
        "unit": "ns per step window (mean over the rank's windows); total = sum over common ranks",
        "parts": list(PARTS),
        "per_rank": [{"rank": int(r["rank"]), **triple(r)} for r in rows],
        "total": total,
    }


def _n_steps(con: duckdb.DuckDBPyConnection, side: str) -> int:
    n = con.execute(f"""SELECT max(c) FROM (SELECT count(step) AS c FROM {side}_tp
                        WHERE rank IN (SELECT rank FROM cmp_common) GROUP BY rank)""").fetchone()[0]
    return max(int(n or 0), 1)


def _imbalance(con: duckdb.DuckDBPyConnection, side: str) -> dict[str, Any]:
    """The job-wide imbalance (whole capture) and straggler verdict of one run."""
    imb = _df(con, f"SELECT * FROM {side}_imb WHERE step IS NULL")
    rr = _df(con, f"SELECT rank, verdict, straggler, times_slowest, cost_ns FROM {side}_rr ORDER BY rank")
    out: dict[str, Any] = {"ratio": None, "slowest_rank": None, "balanced": None, "wait_gpu_ns": None}
    if len(imb):
        r = imb.iloc[0]
        out = {
            "ratio": None if pd.isna(r["ratio"]) else float(r["ratio"]),
            "slowest_rank": None if pd.isna(r["slowest_rank"]) else int(r["slowest_rank"]),
            "balanced": None if pd.isna(r["balanced"]) else bool(r["balanced"]),
            "wait_gpu_ns": None if pd.isna(r["wait_gpu_ns"]) else int(r["wait_gpu_ns"]),
        }
    out["verdict"] = str(rr["verdict"].iloc[0]) if len(rr) and not pd.isna(rr["verdict"].iloc[0]) else None
    out["straggler_ranks"] = [int(x) for x in rr.loc[rr["straggler"].fillna(False).astype(bool), "rank"]]
    return out
