"""The what-if replay as the bound of a rule's recoverable time (issue 19: "diagnose's recoverable
time uses these numbers").

Why: a rule measures its cause on the worst rank (or, for exposed communication, on the critical
rank), an upper bound; the what-if replay (queries/whatif/whatif.sql, docs/whatif.md) removes the cause
from the measured dependencies, so time that other ranks' waits hide is not counted. A rule marked
`@bounded_by(SCENARIO)` reports min(its own bound, the scenario's whole-job gain) and says which one
holds; without what-if rows it keeps its own bound and says why the replay is unknown.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from ..render.units import format_duration
from ..store.query_layer import statements
from ._common import step_metrics
from .base import Ctx, Finding, Signal

SQL = statements("rules/_whatif")


def whatif_gain(ctx: Ctx, scenario: str) -> tuple[int | None, str]:
    """The scenario's whole-job gain_ns (the largest over jobs: a bound for every job), or None and why."""
    if "whatif" not in ctx.objects:
        return None, "the workspace has no whatif table (re-run ingest)"
    gain = ctx.scalar(SQL.sql("whatif_gain", scenario=scenario))
    if gain is None:
        from ..whatif import empty_reason

        return None, empty_reason(ctx.con)
    return int(gain), ""


def bound(ctx: Ctx, f: Finding, scenario: str, gain: int | None, why: str) -> Finding:
    """The finding with its recoverable time bounded by the what-if gain (in place; returned)."""
    own = f.recoverable_ns_per_step
    if own is None or f.kind != "performance":
        return f
    f.metrics["whatif_scenario"] = scenario
    f.metrics["whatif_gain_ns"] = gain
    f.metrics["recoverable_ns_per_step_rule"] = own
    if gain is None:
        f.recoverable_method += f"; what-if bound ({scenario}): unknown ({why}), the rule's own bound is kept"
        f.signals.append(
            Signal(f"what-if gain ({scenario})", None, "ns per step", "neutral", f"unknown: {why}")
        )
        return f
    rec = max(min(own, gain), 0)
    holds = "the what-if gain" if rec < own else "the rule's own measure"
    f.recoverable_method += (
        f"; bounded by the what-if replay: min(this, whatif '{scenario}' gain_ns of the whole job = "
        f"{format_duration(gain)}) (docs/whatif.md); here {holds}"
    )
    f.signals.append(
        Signal(
            f"what-if gain ({scenario})",
            gain,
            "ns per step",
            "supports" if gain > 0 else "against",
            "the job's step time gain when the cause is removed from the replayed dependencies; time the "
            "other ranks' waits hide is not in it",
        )
    )
    if rec < own:
        ctx.set_recoverable(f, rec)
        f.summary += f" The what-if replay bounds the gain at {rec / 1e6:.3f} ms per step."
        f.metrics.update(step_metrics(ctx, f.steps, rec, f.metrics.get("affected_steps_note")))
    return f


def bounded_by(scenario: str) -> Callable[[Callable[[Ctx], list[Finding]]], Callable[[Ctx], list[Finding]]]:
    """Decorate a rule: its findings' recoverable times are bounded by the what-if `scenario`."""

    def decorate(rule: Callable[[Ctx], list[Finding]]) -> Callable[[Ctx], list[Finding]]:
        @functools.wraps(rule)
        def bounded(ctx: Ctx) -> list[Finding]:
            found = rule(ctx)
            if not found:
                return found
            gain, why = whatif_gain(ctx, scenario)
            return [bound(ctx, f, scenario, gain, why) for f in found]

        bounded.whatif_scenario = scenario  # type: ignore[attr-defined]
        return bounded

    return decorate


__all__ = ["bound", "bounded_by", "whatif_gain"]
