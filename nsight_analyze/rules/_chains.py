"""The worst rank's time per step of a per-(rank, step) query, shared by the kernel-level findings
(fusion-candidates, unfused-attention, cuda-graph-candidates): sum over steps of the largest rank's
value / steps (docs/diagnose.md "Recoverable time").
"""

from __future__ import annotations

from ..store.query_layer import statements
from .base import Ctx

SQL = statements("rules/_chains")


def per_step_worst(ctx: Ctx, per_rank_step_sql: str) -> tuple[float, list[int], list[int]]:
    """Total over steps of the worst rank's value per step, the steps and ranks with a value.

    `per_rank_step_sql` yields rows (rank, step, v) for chains inside the windows.
    """
    rows = [
        r
        for r in ctx.rows(SQL.sql("per_rank_step", per_rank_step=per_rank_step_sql))
        if r["v"] is not None and r["v"] > 0
    ]
    worst: dict[int | None, float] = {}
    for r in rows:
        worst[r["step"]] = max(worst.get(r["step"], r["v"]), r["v"])
    total = float(sum(worst.values()))
    steps = sorted({int(r["step"]) for r in rows if r["step"] is not None}) if ctx.has_steps else []
    ranks = sorted({int(r["rank"]) for r in rows})
    return total, steps, ranks
