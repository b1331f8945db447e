"""The steps a per-window bound lists, shared by the kernel-level rules that bound time inside
the step windows.

Why a module of its own: `low-occupancy` (rules/low_occupancy.py) and `host-device-copies`
(rules/host_device_copies.py) both measure their time per diag_windows window and list the steps in
which some rank's share reaches the rule's threshold; one definition, so both list steps alike.
"""

from __future__ import annotations

from ..store.query_layer import statements
from .base import Ctx

SQL = statements("rules/_window_steps")


def steps_of(ctx: Ctx, per_window_sql: str, th_pct: float) -> list[int]:
    """Steps in which some rank's value (column t of rows rank, step, t, window_ns) is >= th_pct of
    its window."""
    if not ctx.has_steps:
        return []
    return [
        int(s) for s in ctx.column(SQL.sql("steps_over_threshold", per_window=per_window_sql, th_pct=th_pct))
    ]
