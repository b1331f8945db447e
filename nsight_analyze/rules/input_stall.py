"""The `input-stall` finding: the GPU idled while the host was inside the input pipeline
(DataLoader NVTX ranges).

Why a module of its own: one finding, one home; its signals (stalled steps, host-bound idle
elsewhere, pageable HtoD copies) and fixes (loader workers and prefetch, pinned memory, moving the
preprocessing) are the input pipeline's alone. The measure it shares with the other idle rules is
rules/_idle.py: the idle split of `time_partition` through `diag_step_causes`; per step, the worst
rank's time in the cause bounds what fixing it can save (the job runs at its slowest rank's pace).
Recoverable per step = sum over steps of that maximum / number of steps.
"""

from __future__ import annotations

from ..store.query_layer import statements
from ._common import step_metrics
from ._idle import cause_totals, gap_evidence, per_step_evidence
from .base import Ctx, Finding, Fix, Signal
from .declare import Cause, Doc, Threshold, finding

SQL = statements("rules/input_stall")


@finding(
    "input-stall",
    doc=Doc(
        what="GPU idle while the host is in the input pipeline (NVTX matching `settings.input_pattern`)",
        source="`diag_step_causes` (time_partition.input_stall_ns), `gaps`",
        recoverable="worst rank's input_stall_ns; steps listed when >= `input_stall_min_pct`",
    ),
    thresholds={
        "input_stall_min_pct": Threshold(
            5.0,
            ("a step is input-stalled when its worst rank waits on the input pipeline >= this % of the step"),
        ),
    },
    reads=("diag_step_causes", "diag_windows", "gaps", "steps", "time_partition"),
    whatif="no-input-stalls",
    causes=(
        Cause(
            "input-stall",
            ("input-stall",),
            "GPU idle waiting on the input pipeline",
            "ns_per_step",
            threshold="input_stall_min_pct",
            measure="input_stall_ns",
        ),
    ),
)
def input_stall(ctx: Ctx) -> list[Finding]:
    """The GPU idled while the host was inside the input pipeline (DataLoader NVTX ranges)."""
    if not ctx.has("diag_step_causes", "diag_windows"):
        return []
    th = ctx.th["input_stall_min_pct"]
    total, steps, ranks = cause_totals(ctx, "input_stall", th)
    if not steps and not (not ctx.has_steps and ranks):
        return []
    rec = ctx.per_step(total)
    ev = [per_step_evidence(ctx, "input_stall", "input stall")]
    if ctx.has("gaps"):
        ev.append(gap_evidence(ctx, "'input_stall'", "input-stall"))
    signals = []
    n_all = ctx.n_steps
    if ctx.has_steps and steps:
        period = sorted({b - a for a, b in zip(steps, steps[1:])})
        signals.append(
            Signal(
                "stalled steps",
                len(steps),
                "steps",
                "supports",
                f"{len(steps)} of {n_all} steps"
                + (
                    f", every {period[0]} steps: periodic, typical of a "
                    "prefetch queue running dry (too few workers)"
                    if len(period) == 1 and len(steps) > 2
                    else ""
                ),
            )
        )
    hb = ctx.scalar(SQL["host_bound_total"]) or 0
    ins = ctx.scalar(SQL["input_stall_total"]) or 0
    signals.append(
        Signal(
            "host-bound idle elsewhere",
            ctx.pct(ctx.per_step(hb / max(ctx.n_ranks, 1))),
            "% of step",
            "against" if hb > 0.5 * ins else "neutral",
            "GPU idle while the host ran other Python code; if large, the host is slow in general, not only "
            "the input pipeline",
        )
    )
    pageable = ctx.scalar(SQL["pageable_htod_copies"]) or 0
    signals.append(
        Signal(
            "pageable HtoD copies",
            pageable,
            "copies",
            "supports" if pageable else "neutral",
            "input batches copied from pageable memory: pin_memory=True makes the copy asynchronous"
            if pageable
            else "input copies already use pinned memory",
        )
    )
    return [
        ctx.finding(
            id="input-stall",
            title="Input pipeline stalls the GPU",
            kind="performance",
            summary=f"The GPU waits on the data loader: {ctx.pct(rec)} % of the mean step "
            f"({rec / 1e6:.3f} ms per step, worst rank per step).",
            ranks=ranks,
            steps=steps,
            recoverable_ns_per_step=rec,
            recoverable_method="sum over steps of the worst rank's input_stall_ns (time_partition) / steps: "
            "the idle time a never-empty input queue would remove",
            metrics={
                "input_stall_ns_total": total,
                "stalled_steps": step_metrics(ctx, steps, rec)["affected_steps"],
                "threshold_pct": th,
                **step_metrics(ctx, steps, rec),
            },
            evidence=ev,
            signals=signals,
            fixes=[
                Fix(
                    "More DataLoader workers (num_workers) and a deeper prefetch_factor",
                    "more host memory and CPU cores per rank; worker start-up time",
                ),
                Fix(
                    "pin_memory=True and .to(device, non_blocking=True)",
                    "pinned host memory is a limited, non-swappable resource",
                ),
                Fix(
                    "Move decoding/augmentation to the GPU (e.g. DALI) or pre-process the dataset offline",
                    "GPU time and memory for preprocessing; storage and a fixed augmentation pipeline",
                ),
            ],
        )
    ]
