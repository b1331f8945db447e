"""Helpers the rule modules share: the affected-step count that goes with a recoverable time, and
the signal that says how much exposed communication is waiting for the last rank.

Why: a finding that recovers time must say in how many steps that time is lost. Without step
windows the whole capture is the only window (counted as 1, `steps` stays empty); with steps, a
rule that does not list steps says so instead of reporting 0 next to a non-zero time. The wait
signal is one measure read by `exposed-comm` (rules/comms.py) and its per-dimension children
(rules/dimensions.py): one definition, so parent and children judge it alike.
"""

from __future__ import annotations

from ..store.query_layer import statements
from .base import Ctx, Signal

SQL = statements("rules/_common")
NO_STEPS_NOTE = "no steps found: the whole capture is one window (the steps list is empty)"


def step_metrics(ctx: Ctx, steps: list[int], rec: int | None, unlisted: str | None = None) -> dict:
    """{"affected_steps": n, "affected_steps_note": why} consistent with the recoverable time `rec`.

    * no steps in the job: 1 when rec > 0 (the capture window), else 0, with NO_STEPS_NOTE;
    * steps listed: their number;
    * rec > 0 and no step listed: None, with `unlisted` (why the rule lists none), never 0;
    * rec None (not bounded): nothing.
    """
    if rec is None:  # not bounded: no time to count steps for
        return {}
    lost = rec > 0
    if not ctx.has_steps:
        return {"affected_steps": 1 if lost else 0, "affected_steps_note": NO_STEPS_NOTE}
    if steps or not lost:
        return {"affected_steps": len(steps)}
    return {
        "affected_steps": None,
        "affected_steps_note": unlisted
        or "the time is spread over the steps: none reaches the listing threshold",
    }


def steps_over(per_step: list[dict], th_pct: float) -> list[int]:
    """The steps (rows: step, rec, step_ns) whose recoverable time is >= th_pct of the step."""
    return sorted(
        int(r["step"])
        for r in per_step
        if r["step"] is not None
        and r["step_ns"]
        and r["rec"] is not None
        and 100.0 * r["rec"] / r["step_ns"] >= th_pct
    )


def last_rank_wait_signal(
    wait_ns: float, exposed_ns: float, note: str, unknown_ns: float = 0, partial: str | None = None
) -> Signal:
    """The share of the exposed communication spent waiting for the last rank to arrive.

    Why: that wait is load imbalance, not missing overlap, so it is taken off the recoverable time;
    above 30 % of the exposed time it speaks against an overlap diagnosis. `note` says what the
    wait is for the caller's communication. No exposed time: 0.0 %, neutral. `unknown_ns` is the
    exposed time of collectives whose wait could not be measured (participants missing from the
    workspace, e.g. `partial` = "1 of 8 ranks"): then the share is unknown (None), never the 0 %
    that the measured collectives alone would give; a measured wait is quoted as a lower bound.
    """
    if unknown_ns > 0 and exposed_ns:
        known = f"at least {100.0 * wait_ns / exposed_ns:.1f} % (measured); " if wait_ns > 0 else ""
        return Signal(
            "exposed time spent waiting for the last rank",
            None,
            "% of exposed",
            "against" if wait_ns > 0.3 * exposed_ns else "neutral",
            f"unknown: {known}{100.0 * min(unknown_ns, exposed_ns) / exposed_ns:.1f} % of the exposed "
            "time is in collectives whose other participants are not in the workspace"
            + (f" (the job is partial: {partial})" if partial else "")
            + ", so their wait for the last rank cannot be measured; "
            + note,
        )
    return Signal(
        "exposed time spent waiting for the last rank",
        round(100.0 * wait_ns / exposed_ns, 1) if exposed_ns else 0.0,
        "% of exposed",
        "against" if exposed_ns and wait_ns > 0.3 * exposed_ns else "neutral",
        note,
    )


def partial_jobs(ctx: Ctx) -> str | None:
    """The label of each job with ranks missing ("1 of 8 ranks"; jobs.complete), or None.

    Why: a wait for the last rank, and anything derived from it, needs every rank of a collective;
    the findings that cannot measure it name the reason the reader can act on (capture all ranks).
    """
    if "jobs" not in ctx.objects:
        return None
    return ctx.scalar(SQL["partial_jobs"])
