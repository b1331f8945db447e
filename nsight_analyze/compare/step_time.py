"""Step times compared: the slowest rank's per-step maximum and every rank's own windows."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import duckdb
import numpy as np

from ..store.duck import plain_records
from ..store.query_layer import statements
from .stats import compare_samples
from .verdict import verdict_of

SQL = statements("compare/step_time")
Windows = list[dict[str, Any]]


def _step_windows(con: duckdb.DuckDBPyConnection, side: str) -> Windows:
    """Per common rank, its step windows; a rank without steps has its capture as one window."""
    return plain_records(con, SQL.sql("step_windows", tp=f"{side}_tp"))


def _slowest(windows: Windows) -> dict[int | None, int]:
    """Per step, the longest window over the ranks: the steps in order, the capture's (None) last."""
    out: dict[int | None, int] = {}
    for w in windows:
        out[w["step"]] = max(out.get(w["step"], w["window_ns"]), w["window_ns"])
    return {s: out[s] for s in sorted(out, key=lambda s: (s is None, s or 0))}


def step_time_comparison(before: Windows, after: Windows, cfg: dict[str, float]) -> dict[str, Any]:
    """Step times of the slowest rank and of every rank, compared; inputs: rows of rank, step,
    window_ns.

    Why the slowest rank: synchronous data-parallel training runs at its pace, so the job's step
    time is the per-step maximum over the ranks both runs have.
    """
    common = sorted({w["rank"] for w in before} & {w["rank"] for w in after})
    keep = set(common)
    b = [w for w in before if w["rank"] in keep]
    a = [w for w in after if w["rank"] in keep]
    slow_b, slow_a = _slowest(b), _slowest(a)
    slowest = compare_samples(np.array(list(slow_b.values())), np.array(list(slow_a.values())), cfg, stream=0)
    wb, wa = ({r: [] for r in common} for _ in range(2))
    for windows, by_rank in ((b, wb), (a, wa)):  # one pass, not one per rank
        for w in windows:
            by_rank[w["rank"]].append(w["window_ns"])

    def one(r: Any) -> dict[str, Any]:  # a vectorised bootstrap with its own seeded generator
        return {"rank": int(r), **compare_samples(np.array(wb[r]), np.array(wa[r]), cfg, stream=1 + int(r))}

    # One bootstrap per rank (64 on a 64-rank job): numpy's generator and sort release the GIL,
    # so threads run them on every core; each rank's stream is its own, so the numbers do not
    # depend on the threads (map keeps the ranks' order).
    with ThreadPoolExecutor(max_workers=max(1, min(len(common), os.cpu_count() or 1))) as pool:
        per_rank = list(pool.map(one, common))
    per_step = [
        {
            "step": None if s is None else int(s),
            "before_ns": int(slow_b[s]),
            "after_ns": int(slow_a[s]),
            "delta_ns": int(slow_a[s] - slow_b[s]),
        }
        for s in slow_b
        if s in slow_a
    ]
    verdict, confidence, why = verdict_of(slowest, cfg)
    samples = {"before": [int(v) for v in slow_b.values()], "after": [int(v) for v in slow_a.values()]}
    return {
        "slowest": slowest,
        "per_rank": per_rank,
        "per_step": per_step,
        "slowest_samples_ns": samples,
        "verdict": {"verdict": verdict, "confidence": confidence, "why": why},
    }
