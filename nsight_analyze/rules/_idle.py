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

from .base import Ctx, Evidence


def cause_totals(ctx: Ctx, cause: str, min_pct: float) -> tuple[int, list[int], list[int]]:
    """(total ns over steps of the worst rank, affected steps, ranks over the threshold)."""
    causes = f"(SELECT * FROM diag_step_causes WHERE cause = '{cause}')"
    windows = "diag_windows"
    if cause == "launch" and has_capture(ctx):
        # graph capture and compilation are one-time work (capture_idle): the steady state does
        # not lose their idle
        windows = f"({STEADY_WINDOWS})"
        causes = f"""(SELECT step, max(launch_gap_ns + host_bound_ns) AS max_ns,
                             100.0 * max(launch_gap_ns + host_bound_ns) / nullif(max(window_ns), 0)
                                 AS share_pct
                      FROM {windows} GROUP BY step)"""
    total = ctx.scalar(f"SELECT coalesce(sum(max_ns), 0) FROM {causes}") or 0
    steps = ctx.column(f"SELECT step FROM {causes} WHERE max_ns > 0 AND share_pct >= {min_pct} ORDER BY step")
    col = {
        "input_stall": "input_stall_ns",
        "sync_stall": "sync_stall_ns",
        "launch": "launch_gap_ns + host_bound_ns",
    }[cause]
    ranks = ctx.column(
        f"SELECT DISTINCT rank FROM {windows} WHERE {col} > 0 "
        f"AND 100.0 * ({col}) / nullif(window_ns, 0) >= {min_pct} ORDER BY rank"
    )
    return int(total), [int(s) for s in steps if s is not None], [int(r) for r in ranks]


def has_capture(ctx: Ctx) -> bool:
    """Whether a window holds idle inside a one-time phase (graph capture or instantiation,
    torch.compile compilation: capture_idle)."""
    return ctx.has("capture_idle") and bool(ctx.scalar("SELECT count(*) FROM capture_idle WHERE idle_ns > 0"))


# diag_windows without the idle of one-time phases (capture_idle: graph capture, torch.compile
# compilation): each cause loses its own part of the idle inside the phases.
STEADY_WINDOWS = """SELECT d.* REPLACE (
           greatest(d.host_bound_ns - coalesce(c.idle_ns - c.launch_gap_idle_ns, 0), 0) AS host_bound_ns,
           greatest(d.launch_gap_ns - coalesce(c.launch_gap_idle_ns, 0), 0) AS launch_gap_ns)
    FROM diag_windows AS d
    LEFT JOIN capture_idle AS c ON c.rank = d.rank AND c.step IS NOT DISTINCT FROM d.step"""


def per_step_evidence(ctx: Ctx, cause: str, label: str) -> Evidence:
    """The per-step table behind a cause's number: the worst rank's time in it per step."""
    return ctx.evidence(
        f"{label} per step",
        f"Per step: the worst rank's {label} time, the step length and the ranks affected "
        f"(diag_step_causes).",
        f"""SELECT step, worst_rank, max_ns AS {cause}_ns, step_ns, round(share_pct, 2) AS share_pct, ranks
            FROM diag_step_causes WHERE cause = '{cause}' AND max_ns > 0 ORDER BY max_ns DESC, step""",
    )


def gap_evidence(ctx: Ctx, causes: str, label: str) -> Evidence:
    """The idle pieces (gaps) of the causes, longest first, with what the host was doing."""
    where = "step IS NOT NULL" if ctx.has_steps else "step IS NULL"
    return ctx.evidence(
        f"{label} gaps",
        "The idle pieces behind the number, longest first, with what the host was doing (gaps view).",
        f"""SELECT rank, step, start_ns, duration_ns, cause, host_activity FROM gaps
            WHERE {where} AND cause IN ({causes}) ORDER BY duration_ns DESC, rank, start_ns""",
    )
