"""Why a rank is slow: its cause (rank_attribution) and what fixing it buys (whatif replay).

The straggler rule (comms.imbalance) says *which* rank the others wait for; this one says *why*
(slow GPU, more work, slow host, late input, slow links) with the kernels, counts or gaps
compared, and takes its recoverable time from the what-if replay (docs/whatif.md), so a rank
whose delay is hidden behind others' waits is not credited with time the job would not gain.
"""

from __future__ import annotations

from ..store.query_layer import statements
from ..whatif import evidence as evidence_text
from ._common import step_metrics
from ._whatif import whatif_gain
from .base import Ctx, Finding, Fix, Signal
from .declare import Doc, finding

SQL = statements("rules/slow_rank")

FIXES = {
    "slow-gpu": [
        Fix(
            "Check the slow GPU's clocks, temperature, power cap and ECC/XID errors (nvidia-smi -q -d "
            "CLOCK,PERFORMANCE,TEMPERATURE,POWER,ECC); drain or replace the node if it throttles",
            "replacing a node costs a restart; a throttled GPU rarely recovers on its own",
        ),
    ],
    "more-work": [
        Fix(
            "Balance the work per rank: even sharding, length-grouped or packed batches (variable sequence "
            "lengths), balanced pipeline stages / expert capacity",
            "packing changes the data order; rebalancing stages changes memory per GPU",
        ),
    ],
    "slow-host": [
        Fix(
            "Give the rank's process its own CPU cores and NUMA node (taskset/numactl, no oversubscription), "
            "move host work out of the step, capture the step in CUDA graphs",
            "pinning needs the job launcher's help; graphs need static shapes",
        ),
    ],
    "late-input": [
        Fix(
            "More data-loader workers and prefetch (num_workers, prefetch_factor, pin_memory) on that rank; "
            "check its storage or network share",
            "more workers use host memory and CPU",
        ),
    ],
    "slow-link": [
        Fix(
            "Check the node's NICs and links (ibstat, port counters, NCCL_DEBUG=INFO for the chosen "
            "transports; run nccl-tests between this node and another)",
            "a degraded link often needs a cable or switch-port replacement",
        ),
    ],
}


@finding(
    "slow-rank-slow-gpu",
    "slow-rank-more-work",
    "slow-rank-slow-host",
    "slow-rank-late-input",
    "slow-rank-slow-link",
    doc=Doc(
        what="why a rank is slower than the median rank, one finding per cause `rank_attribution` "
        "blames ranks for: `slow-gpu` (the same kernels take longer), `more-work` (more kernels), "
        "`slow-host` (launch gaps and host-bound idle), `late-input` (input stalls), `slow-link` (the "
        "same collectives' transfers take longer): the largest of the rank's excesses when it reaches "
        "3 % of the median rank's window; each blamed rank's excess as a signal, the cause's fixes",
        source="`rank_attribution`, `whatif`",
        recoverable="the `slowest-rank-at-median` what-if gain of the whole job (null, not 0, when the "
        "replay has no rows), shared by every blamed rank",
    ),
    shown="`slow-rank-<cause>` (`slow-gpu`, `more-work`, `slow-host`, `late-input`, `slow-link`)",
    reads=("rank_attribution", "whatif"),
)
def slow_rank(ctx: Ctx) -> list[Finding]:
    """One finding per cause that rank_attribution blames a rank for."""
    if not ctx.has("rank_attribution", "whatif"):
        return []
    rows = ctx.rows(SQL["blamed_ranks"])
    if not rows:
        return []
    gain = ctx.scalar(SQL["slowest_rank_gain"])
    # no what-if rows: the gain is unknown (None, with the reason), never 0 (rules/_whatif.py)
    rec = None if gain is None else max(int(gain), 0)
    unknown = (
        "" if gain is not None else f" The gain is unknown: {whatif_gain(ctx, 'slowest-rank-at-median')[1]}."
    )
    findings = []
    for cause in sorted({r["cause"] for r in rows}):
        recs = [r for r in rows if r["cause"] == cause]
        ranks = sorted(int(r["rank"]) for r in recs)
        signals = [
            Signal(
                f"rank {r['rank']}: {cause} excess",
                int(r["excess_ns"]),
                "ns",
                "supports",
                evidence_text(r) or "",
            )
            for r in recs
        ]
        steps = ctx.column(SQL.sql("cause_steps", cause=cause, ranks=", ".join(map(str, ranks))))
        findings.append(
            ctx.finding(
                id=f"slow-rank-{cause}",
                title=f"Rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))} slow: {cause}",
                kind="performance",
                summary=f"{evidence_text(recs[0])}."
                + (
                    unknown
                    if rec is None
                    else f" The job's step would be {rec / 1e6:.3f} ms shorter if the slow rank(s) ran at "
                    "the median rank's speed (what-if replay)."
                ),
                ranks=ranks,
                steps=[int(s) for s in steps],
                recoverable_ns_per_step=rec,
                recoverable_method="whatif 'slowest-rank-at-median' gain_ns (whole job): the measured "
                "dependencies replayed with the blamed ranks at the median rank's speed (docs/whatif.md); "
                "shared by every blamed rank",
                metrics={
                    "cause": cause,
                    "excess_ns_by_rank": {str(r["rank"]): int(r["excess_ns"]) for r in recs},
                    **step_metrics(ctx, [int(s) for s in steps], rec),
                },
                evidence=[
                    ctx.evidence(
                        "attribution",
                        "Each rank's excess over the median rank by cause (rank_attribution, whole job).",
                        SQL["attribution"],
                    ),
                    ctx.evidence(
                        "what-if",
                        "The job's step time with each cause removed (whatif, whole job).",
                        SQL["whatif_whole_job"],
                    ),
                ],
                signals=signals,
                fixes=FIXES.get(cause, []),
            )
        )
    return findings
