"""Step times compared: the slowest rank's per-step maximum and every rank's own windows."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import duckdb
import pandas as pd

from .sides import _df
from .stats import compare_samples
from .verdict import verdict_of


def _step_windows(con: duckdb.DuckDBPyConnection, side: str) -> pd.DataFrame:
    """Per common rank, its step windows; a rank without steps has its capture as one window."""
    return _df(
        con,
        f"""
        SELECT rank, step, window_ns FROM {side}_tp t
        WHERE rank IN (SELECT rank FROM cmp_common)
          AND (step IS NOT NULL OR NOT EXISTS (
                SELECT 1 FROM {side}_tp u WHERE u.rank = t.rank AND u.step IS NOT NULL))
        ORDER BY rank, step""",
    )


def step_time_comparison(before: pd.DataFrame, after: pd.DataFrame, cfg: dict[str, float]) -> dict[str, Any]:
    """Step times of the slowest rank and of every rank, compared; inputs: rank, step, window_ns.

    Why the slowest rank: synchronous data-parallel training runs at its pace, so the job's step
    time is the per-step maximum over the ranks both runs have.
    """
    common = sorted(set(before["rank"]) & set(after["rank"]))
    b = before[before["rank"].isin(common)]
    a = after[after["rank"].isin(common)]
    slow_b = b.groupby("step", dropna=False)["window_ns"].max()
    slow_a = a.groupby("step", dropna=False)["window_ns"].max()
    slowest = compare_samples(slow_b.to_numpy(), slow_a.to_numpy(), cfg, stream=0)
    wb = {r: g.to_numpy() for r, g in b.groupby("rank")["window_ns"]}  # one pass, not one per rank
    wa = {r: g.to_numpy() for r, g in a.groupby("rank")["window_ns"]}

    def one(r: Any) -> dict[str, Any]:  # a vectorised bootstrap with its own seeded generator
        return {"rank": int(r), **compare_samples(wb[r], wa[r], cfg, stream=1 + int(r))}

    # One bootstrap per rank (64 on a 64-rank job): numpy's generator and sort release the GIL,
    # so threads run them on every core; each rank's stream is its own, so the numbers do not
    # depend on the threads (map keeps the ranks' order).
    with ThreadPoolExecutor(max_workers=max(1, min(len(common), os.cpu_count() or 1))) as pool:
        per_rank = list(pool.map(one, common))
    joined = pd.concat([slow_b.rename("before_ns"), slow_a.rename("after_ns")], axis=1, join="inner")
    per_step = [
        {
            "step": None if pd.isna(s) else int(s),
            "before_ns": int(v.before_ns),
            "after_ns": int(v.after_ns),
            "delta_ns": int(v.after_ns - v.before_ns),
        }
        for s, v in joined.sort_index().iterrows()
    ]
    verdict, confidence, why = verdict_of(slowest, cfg)
    samples = {"before": [int(v) for v in slow_b.to_numpy()], "after": [int(v) for v in slow_a.to_numpy()]}
    return {
        "slowest": slowest,
        "per_rank": per_rank,
        "per_step": per_step,
        "slowest_samples_ns": samples,
        "verdict": {"verdict": verdict, "confidence": confidence, "why": why},
    }
