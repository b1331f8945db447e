"""What the idle-time rules share: the worst rank's time in one idle cause per step, the
steady-state windows (without the one-time idle of graph capture and compilation) and the evidence
tables of a cause.

Why a module of its own: `input-stall`, `synchronisation` and `launch-bound` (rules/input_stall.py,
rules/synchronisation.py, rules/launch_bound.py) measure their cause the same way; one definition,
so the three bound, list steps and show evidence alike.

All three idle rules read the idle split of `time_partition` through `diag_step_causes`: per
step, the worst rank's time in the cause bounds what fixing it can save (the job runs at its slowest
rank's pace). Recoverable per step = sum over steps of that maximum / number of steps.
"""

from __future__ import annotations

from ..store.query_layer import statements
from .base import Ctx, Evidence

SQL = statements("rules/_idle")

# diag_windows without the idle of one-time phases (rules/launch_bound.py imports it too).
STEADY_WINDOWS = SQL["steady_windows"]


def cause_totals(ctx: Ctx, cause: str, min_pct: float) -> tuple[int, list[int], list[int]]:
    """(total ns over steps of the worst rank, affected steps, ranks over the threshold)."""
    causes = SQL.sql("cause_per_step", cause=cause)
    windows = SQL["all_windows"]
    if cause == "launch" and has_capture(ctx):
        # graph capture and compilation are one-time work (capture_idle): the steady state does
        # not lose their idle
        windows = STEADY_WINDOWS
        causes = SQL.sql("steady_launch_per_step", steady_windows=STEADY_WINDOWS)
    total = ctx.scalar(SQL.sql("cause_total", causes=causes)) or 0
    steps = ctx.column(SQL.sql("cause_steps", causes=causes, min_pct=min_pct))
    if cause == "launch":
        ranks = ctx.column(SQL.sql("launch_ranks", windows=windows, min_pct=min_pct))
    else:
        column = {"input_stall": "input_stall_ns", "sync_stall": "sync_stall_ns"}[cause]
        ranks = ctx.column(SQL.sql("cause_ranks", windows=windows, column=column, min_pct=min_pct))
    return int(total), [int(s) for s in steps if s is not None], [int(r) for r in ranks]


def has_capture(ctx: Ctx) -> bool:
    """Whether a window holds idle inside a one-time phase (graph capture or instantiation,
    torch.compile compilation: capture_idle)."""
    return ctx.has("capture_idle") and bool(ctx.scalar(SQL["capture_idle_windows"]))


def per_step_evidence(ctx: Ctx, cause: str, label: str) -> Evidence:
    """The per-step table behind a cause's number: the worst rank's time in it per step."""
    return ctx.evidence(
        f"{label} per step",
        f"Per step: the worst rank's {label} time, the step length and the ranks affected "
        f"(diag_step_causes).",
        SQL.sql("per_step_evidence", cause=cause),
    )


def gap_evidence(ctx: Ctx, causes: str, label: str) -> Evidence:
    """The idle pieces (gaps) of the causes, longest first, with what the host was doing."""
    return ctx.evidence(
        f"{label} gaps",
        "The idle pieces behind the number, longest first, with what the host was doing (gaps view).",
        SQL.sql("gap_evidence", in_steps=ctx.in_steps, causes=causes),
    )
