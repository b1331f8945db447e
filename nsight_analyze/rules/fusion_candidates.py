"""Fusion candidates: runs of memory-bound elementwise/normalisation kernels one fused kernel could
replace.

Why: after the idle and communication findings, the next question is which kernels to change and
how much that buys. The rule reads the stored per-rank chains (`kernel_chains`, kind fusion), so
diagnose never walks the kernels again; the recoverable time is an upper bound per step, worst
rank per step (docs/diagnose.md "Recoverable time"), and every fix states what it costs.
"""

from __future__ import annotations

from ..store.query_layer import statements
from ._chains import per_step_worst
from ._common import step_metrics
from .base import Ctx, Finding, Fix, Signal
from .declare import Doc, Threshold, finding

SQL = statements("rules/fusion_candidates")


@finding(
    "fusion-candidates",
    doc=Doc(
        what=(
            "runs of >= `fusion_min_kernels` consecutive memory-bound "
            "elementwise/normalisation/softmax/reduction kernels on one stream, each within 5 us of the "
            "previous one (already-fused Triton/nvFuser/multi_tensor_apply kernels break a run)"
        ),
        source="`kernel_chains` (kind fusion)",
        recoverable=(
            "per step, worst rank's sum over chains of span - longest kernel (the fused kernel runs at "
            "least as long as the longest member); reported when >= `fusion_min_pct`"
        ),
    ),
    thresholds={
        "fusion_min_kernels": Threshold(
            4.0,
            (
                "a run of at least this many consecutive memory-bound elementwise/norm kernels is a fusion "
                "candidate"
            ),
        ),
        "fusion_min_pct": Threshold(
            1.0, "report fusion candidates when they can recover >= this % of the mean step"
        ),
    },
    reads=("gaps", "kernel_chains", "steps"),
)
def fusion_candidates(ctx: Ctx) -> list[Finding]:
    """Chains of consecutive memory-bound elementwise/normalisation kernels with short gaps."""
    if not ctx.has("kernel_chains"):
        return []
    n_min = int(ctx.th["fusion_min_kernels"])
    total, steps, ranks = per_step_worst(ctx, SQL.sql("recoverable_per_rank_step", min_kernels=n_min))
    rec = ctx.per_step(total)
    if not total or (ctx.pct(rec) or 0) < ctx.th["fusion_min_pct"]:
        return []
    stats = ctx.row(SQL.sql("chain_totals", min_kernels=n_min))
    n_win = (len(steps) if steps else ctx.n_steps) * max(len(ranks), 1)  # affected (rank, step) windows
    per_step_kernels = float(stats["kernels"]) / max(n_win, 1)
    ev = [
        ctx.evidence(
            "fusion candidates by chain",
            f"Runs of >= {n_min} consecutive memory-bound elementwise/normalisation kernels on one "
            "stream, each within 5 us of the previous one (kernel_chains), grouped by the kernels they "
            "run: launches, time, and the bound on what fusing each run into one kernel saves.",
            SQL.sql("chains_by_kernels", min_kernels=n_min),
        ),
        ctx.evidence(
            "fusion candidates per rank and step",
            "Chains, kernels and recoverable time per rank and step window.",
            SQL.sql("chains_per_rank_step", min_kernels=n_min),
        ),
    ]
    short_ns = ctx.th["short_kernel_us"] * 1000
    med = float(stats["median_kernel_ns"] or 0)
    return [
        ctx.finding(
            id="fusion-candidates",
            title="Chains of unfused elementwise/normalisation kernels",
            kind="performance",
            summary=f"{int(stats['chains'])} chains of {int(stats['shortest'])} to {int(stats['longest'])} "
            f"consecutive memory-bound kernels ({per_step_kernels:.0f} launches per affected rank and step) "
            f"run {float(stats['busy_ns']) / max(n_win, 1) / 1e6:.3f} ms per affected rank and step; "
            f"fusing each chain into one kernel saves up to {rec / 1e6:.3f} ms per step "
            f"({ctx.pct(rec)} % of the mean step).",
            ranks=ranks,
            steps=steps,
            recoverable_ns_per_step=rec,
            recoverable_method="per step, worst rank's sum over chains of (span - longest kernel): a "
            "fused kernel is taken to run at least as long as the chain's longest member, the other "
            "members' memory round trips and the launch gaps between them go away; / steps",
            metrics={
                "chains": int(stats["chains"]),
                "chain_kernels": int(stats["kernels"]),
                "longest_chain": int(stats["longest"]),
                "chain_kernel_ns_total": int(stats["busy_ns"]),
                "chain_gap_ns_total": int(stats["gap_ns"]),
                "min_kernels": n_min,
                **step_metrics(ctx, steps, rec),
            },
            evidence=ev,
            signals=[
                Signal(
                    "median kernel in the chains",
                    round(med),
                    "ns",
                    "supports" if med < short_ns else "neutral",
                    "short kernels: launch and memory latency dominate, fusion removes both"
                    if med < short_ns
                    else "long kernels stream at bandwidth: fusion saves the intermediate reads/writes",
                ),
                Signal(
                    "gaps inside the chains",
                    int(stats["gap_ns"]),
                    "ns",
                    "neutral",
                    "launch gaps between the chained kernels, also removed by fusion",
                ),
                Signal(
                    "source",
                    "kernel name rules",
                    "",
                    "neutral",
                    "memory-bound by name class; Nsight Compute (DRAM throughput) confirms it",
                ),
            ],
            fixes=[
                Fix(
                    "Compile the model region (torch.compile, mode='max-autotune-no-cudagraphs' or "
                    "default): Inductor fuses chains of pointwise/reduction ops into one Triton kernel",
                    "compile time at start-up and on every new shape (recompiles on dynamic shapes), "
                    "harder debugging; fused kernels use more registers (lower occupancy)",
                ),
                Fix(
                    "Use fused library kernels for the pattern: fused LayerNorm/RMSNorm (Apex, "
                    "Transformer Engine), fused bias+activation (GELU/SwiGLU), fused optimizers "
                    "(AdamW(fused=True))",
                    "an extra dependency; fused kernels support fewer dtypes/shapes; another "
                    "implementation to validate numerically",
                ),
                Fix(
                    "Write the chain as one custom kernel (Triton) when no library kernel fits",
                    "code to maintain and tune per GPU; register pressure limits how much fits",
                ),
            ],
        )
    ]
