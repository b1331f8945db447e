"""Communication rules: exposed (poorly overlapped) collectives, and load imbalance / stragglers.

The two are separated on purpose: a rank that waits in a collective for a late rank shows exposed
communication, but better overlap cannot recover that wait; only fixing the late rank can.
"""

from __future__ import annotations

import math

from ..store.query_layer import statements
from ._common import last_rank_wait_signal, partial_jobs, step_metrics, steps_over
from .base import Ctx, Finding, Fix, Signal
from .comm_families import FAMILY_NAMES, comm_fixes, family_signal
from .declare import Cause, Doc, Threshold, finding
from .dimensions import breakdown_evidence

SQL = statements("rules/comms")


@finding(
    "exposed-comm",
    doc=Doc(
        what=(
            "collectives not hidden behind compute, per collective and bucket. Its fixes follow the "
            "collectives and dimensions that hold most of its exposed time "
            "(`rules/comm_families.comm_fixes`, shared with the children; `metrics.exposed_by_family`): "
            "families (a known dimension's, else the collective's: all-reduce `dp`, all-gather / "
            "reduce-scatter `fsdp`, all-to-all `ep`, send/recv `p2p` (pipeline schedule, batched p2p "
            "overlapped with compute, or an all-to-all built from send/recv), `broadcast`; a collective "
            "kernel that is not NCCL's by its name: custom / symmetric-memory all-reduce, all-gather, "
            "reduce-scatter `tp`, DeepEP `ep`, peer copies `p2p`) are taken largest first until 80 % of "
            "the exposed time, none under 10 % but the largest; an unknown dimension adds how to make "
            "it known; NCCL settings close the list. In a partial job: title, summary and signals say "
            "how much is unknown (above)"
        ),
        source="`diag_comm_exposure`, `diag_comm_recoverable`, `collectives`",
        recoverable=(
            "min over ranks of exposed - exposed wait - last transfer (an upper bound when waits are "
            "not measured; `metrics.recoverable_ns_per_step_min` takes off `unknown_wait_ns`); reported "
            "when >= `exposed_comm_min_pct`"
        ),
    ),
    thresholds={
        "exposed_comm_min_pct": Threshold(
            10.0,
            ("report exposed communication when the overlap-recoverable part is >= this % of the mean step"),
        ),
    },
    reads=(
        "collectives",
        "diag_comm_exposure",
        "diag_comm_recoverable",
        "diag_windows",
        "imbalance",
        "steps",
        "time_partition",
    ),
    whatif="comms-hidden",
    causes=(
        Cause(
            "exposed-comm",
            ("exposed-comm",),
            "Exposed communication that overlap could hide",
            "ns_per_step",
            threshold="exposed_comm_min_pct",
        ),
    ),
)
def exposed_comm(ctx: Ctx) -> list[Finding]:
    """Communication not hidden behind compute, minus waits for late ranks and the last transfer."""
    if not ctx.has("diag_comm_recoverable", "diag_comm_exposure"):
        return []
    th = ctx.th["exposed_comm_min_pct"]
    per_step = ctx.rows(SQL["recoverable_per_step"])
    if not per_step:
        return []
    total = int(sum(r["rec"] for r in per_step if r["rec"] is not None))
    rec = ctx.per_step(total)
    if (ctx.pct(rec) or 0) < th:
        return []
    steps = steps_over(per_step, th)
    ranks = ctx.column(SQL.sql("exposed_ranks", th=th))
    ev = [
        ctx.evidence(
            "exposed communication per step",
            "Per step: the critical rank's overlap-recoverable exposed comms (min over ranks), the largest "
            "exposed comms, the wait for the last rank and the last reduction's transfer (NULL when not "
            "measured: participants missing), the exposed time whose wait was not measured and the step "
            "length (diag_comm_recoverable).",
            SQL["exposed_per_step"],
        ),
        ctx.evidence(
            "per collective and bucket",
            "Each collective by its position in the step (bucket): its communicator's dimension, mean "
            "duration, exposed part, the part spent waiting for the last rank (NULL when not measured: "
            "participants missing), and how much was hidden (diag_comm_exposure).",
            SQL["per_collective_and_bucket"],
        ),
    ]
    by_dim = breakdown_evidence(ctx)  # the split by parallelism dimension (rules/dimensions.py)
    if by_dim is not None:
        ev.append(by_dim)
    ov = ctx.scalar(SQL["mean_overlap"])
    sums = ctx.row(SQL["exposed_sums"])
    wait, exposed_sum, last = (float(sums[k] or 0) for k in ("wait", "exposed", "last"))
    # exposed time whose wait for the last rank was not measured (participants missing): outside the
    # last reduction it may be wait (not recoverable); in the last reduction wait and transfer split
    # in unknown shares (both excluded alike)
    unknown, last_unknown = float(sums["unknown"] or 0), float(sums["last_unknown"] or 0)
    partial = partial_jobs(ctx)
    fixes, fams = comm_fixes(ctx)
    signals = [
        Signal(
            "mean comms/compute overlap",
            round(ov, 1) if ov is not None else None,
            "%",
            "supports" if ov is not None and ov < 50 else "neutral",
            "share of communication time hidden behind other GPU work (time_partition.overlap_pct)",
        ),
        last_rank_wait_signal(
            wait,
            exposed_sum,
            "waiting for a late rank is load imbalance, not an overlap problem; it is "
            "excluded from the recoverable time (see the imbalance finding)",
            unknown + last_unknown,
            partial,
        ),
        Signal(
            "exposed transfer of the last collective",
            None if last_unknown > 0 else round(100.0 * last / exposed_sum, 1) if exposed_sum else 0.0,
            "% of exposed",
            "against" if exposed_sum and last > 0.5 * exposed_sum and not last_unknown else "neutral",
            (
                f"unknown: the step's last reduction is {100.0 * last / exposed_sum:.1f} % of the exposed "
                "time, its wait for the last rank and its own transfer in shares that cannot be measured "
                "without its other participants"
                + (f" (the job is partial: {partial})" if partial else "")
                + "; both are excluded from the recoverable time"
                if last_unknown > 0
                else "the last gradients are ready only when backward ends, so this part cannot "
                "be overlapped and is excluded"
            ),
        ),
    ]
    fam = family_signal(fams)
    if fam is not None:
        signals.append(fam)
    if ctx.has("collectives"):
        bw = ctx.rows(SQL["median_busbw"])
        for op, b in ((r["op"], r["busbw"]) for r in bw):
            signals.append(
                Signal(
                    f"median bus bandwidth {op}",
                    round(float(b), 1),
                    "GB/s",
                    "neutral",
                    "low bus bandwidth points at the network/NCCL settings rather than overlap",
                )
            )
    top = fams[0] if fams else None
    mostly = (
        f" {100.0 * float(top['share'] or 0):.0f} % of the exposed time is {top['ops']} "
        f"({FAMILY_NAMES.get(str(top['family']), str(top['family']))}); the fixes follow it."
        if top is not None
        else ""
    )
    low = (
        ctx.per_step(float(sum(r["rec_min"] for r in per_step if r["rec_min"] is not None)))
        if unknown
        else None
    )
    if unknown > 0:  # part of the exposed time may be waiting for ranks that are not in the workspace
        title = "Communication is exposed (how much overlap could hide is unknown: ranks are missing)"
        summary = (
            f"Collectives run with nothing to hide behind, but at most {rec / 1e6:.3f} ms per step "
            f"({ctx.pct(rec)} % of the mean step) could be overlapped with compute: "
            f"{100.0 * min(unknown + last_unknown, exposed_sum) / exposed_sum:.1f} % of the exposed time is "
            "in collectives whose other "
            "participants are not in the workspace"
            + (f" (the job is partial: {partial})" if partial else "")
            + ", so the part spent waiting for them, which overlap cannot recover, is unknown "
            f"(overlap could recover between {low / 1e6:.3f} and {rec / 1e6:.3f} ms per step)." + mostly
        )
    else:
        title = "Communication is exposed (poor compute/communication overlap)"
        summary = (
            f"Collectives run with nothing to hide behind: {rec / 1e6:.3f} ms per step ({ctx.pct(rec)} % of "
            f"the mean step) could be overlapped with compute." + mostly
        )
    method = (
        "per step, min over ranks of (comms_exposed_ns - exposed wait for the last arrival - exposed "
        "transfer of the step's last collective) (diag_comm_recoverable); summed over steps / steps. Min "
        "over ranks: the step shrinks only if every rank's timeline can, and the critical "
        "(last-arriving) rank has the least slack"
    )
    if low is not None:
        method += (
            "; an upper bound: exposed time of collectives whose wait for the last arrival was not "
            "measured (diag_comm_recoverable.unknown_wait_ns: participants missing) is counted as "
            f"recoverable; without it (metrics recoverable_ns_per_step_min): {low} ns"
        )
    return [
        ctx.finding(
            id="exposed-comm",
            title=title,
            kind="performance",
            summary=summary,
            ranks=[int(r) for r in ranks],
            steps=steps,
            recoverable_ns_per_step=rec,
            recoverable_method=method,
            metrics={
                "recoverable_ns_total": total,
                "mean_overlap_pct": ov,
                "threshold_pct": th,
                "wait_unknown_ns_total": int(unknown + last_unknown),
                "recoverable_ns_per_step_min": low,
                "partial_job": partial,
                "exposed_by_family": [
                    {
                        "family": f["family"],
                        "ops": f["ops"],
                        "dimensions": f["dimensions"],
                        "exposed_ns": f["exposed_ns"],
                        "share_pct": round(100.0 * float(f["share"] or 0), 1),
                        "fixes_given": f["taken"],
                    }
                    for f in fams
                ],
                **step_metrics(ctx, steps, rec),
            },
            evidence=ev,
            signals=signals,
            fixes=fixes,
        )
    ]


@finding(
    "load-imbalance",
    doc=Doc(
        what="straggler (persistent) or rotating slowest rank",
        source="`imbalance`, `merge_straggler_verdict`, `rank_rollup`",
        recoverable=(
            "slowest compute - mean of the others; reported when the verdict is not balanced and >= "
            "`imbalance_min_pct`"
        ),
    ),
    thresholds={
        "imbalance_min_pct": Threshold(
            3.0, "report load imbalance when the slowest rank's extra compute is >= this % of the mean step"
        ),
    },
    reads=(
        "alignment_quality",
        "collectives",
        "diag_windows",
        "imbalance",
        "merge_straggler_verdict",
        "rank_rollup",
        "steps",
        "time_partition",
    ),
    whatif="slowest-rank-at-median",
    causes=(
        Cause(
            "load-imbalance",
            ("load-imbalance",),
            "Load imbalance: the slowest rank's extra compute",
            "ns_per_step",
            threshold="imbalance_min_pct",
        ),
    ),
)
def imbalance(ctx: Ctx) -> list[Finding]:
    """One rank computes longer than the others and the rest wait for it at every collective."""
    if not ctx.has("imbalance", "merge_straggler_verdict"):
        return []
    per_step = ctx.rows(SQL.sql("imbalance_per_step", where=ctx.in_steps))
    if not per_step:
        return []
    total = int(round(math.fsum(max(r["excess_ns"], 0.0) for r in per_step if r["excess_ns"] is not None)))
    rec = ctx.per_step(total)
    v = ctx.row(SQL["straggler_verdict"])
    if v.get("verdict") in (None, "balanced", "unknown") or (ctx.pct(rec) or 0) < ctx.th["imbalance_min_pct"]:
        return []
    straggler = v.get("straggler_rank")
    if straggler is not None:
        ranks = [int(straggler)]
    else:
        ranks = sorted({int(r["slowest_rank"]) for r in per_step if r["balanced"] is False})
    steps = sorted(int(r["step"]) for r in per_step if r["step"] is not None and r["balanced"] is False)
    ev = [
        ctx.evidence(
            "imbalance per step",
            "Per step: the slowest rank's compute against the mean (imbalance).",
            SQL.sql("imbalance_evidence", where=ctx.in_steps),
        ),
        ctx.evidence(
            "straggler verdict",
            "Job-wide verdict (merge_straggler_verdict).",
            SQL["straggler_verdict"],
        ),
    ]
    if ctx.has("rank_rollup"):
        ev.append(
            ctx.evidence(
                "per rank",
                "Each rank's compute, the collective wait it suffered and caused (rank_rollup).",
                SQL["per_rank"],
            )
        )
    signals = [
        Signal(
            "verdict",
            v.get("verdict"),
            "",
            "supports",
            f"slowest in {round(100 * float(v.get('top_share') or 0), 1)} % of the imbalanced steps: "
            f"rank {v.get('top_rank')}",
        )
    ]
    if ctx.has("rank_rollup") and ranks:
        rr = ctx.rows(SQL["wait_caused"])
        caused = sum(
            r["wait_caused_ns"] for r in rr if r["rank"] in ranks and r["wait_caused_ns"] is not None
        )
        signals.append(
            Signal(
                "collective wait caused by the slow rank(s)",
                int(caused),
                "GPU-ns",
                "supports" if caused > 0 else "against",
                "the other ranks' wait at collectives where it arrived last",
            )
        )
    if ranks:
        idle = {
            r["slow"]: r["c"]
            for r in ctx.rows(SQL.sql("compute_slow_vs_others", ranks=", ".join(map(str, ranks))))
        }
        if True in idle and False in idle:
            extra = float(idle[True]) - float(idle[False])
            signals.append(
                Signal(
                    "slow rank's extra compute per step",
                    int(extra),
                    "ns",
                    "supports" if extra > 0 else "against",
                    "the same kernels take longer on it: check its clocks, temperature, power cap and ECC "
                    "(nvidia-smi -q), or uneven work (sequence lengths, pipeline stages)",
                )
            )
    resid = ctx.scalar(SQL["max_residual_p95"]) if ctx.has("alignment_quality") else None
    if resid is not None:
        signals.append(
            Signal(
                "clock alignment residual p95",
                resid,
                "ns",
                "neutral",
                "compute imbalance is measured per rank and does not depend on clock alignment",
            )
        )
    return [
        ctx.finding(
            id="load-imbalance",
            title=(
                f"Straggler: rank {ranks[0]} is persistently slower"
                if v.get("verdict") == "persistent"
                else "Load imbalance across ranks (rotating slowest rank)"
            ),
            kind="performance",
            summary=f"The slowest rank computes {rec / 1e6:.3f} ms per step longer than the others' mean "
            f"({ctx.pct(rec)} % of the mean step); the others wait for it at the next collective.",
            ranks=ranks,
            steps=steps,
            recoverable_ns_per_step=rec,
            recoverable_method="per step, slowest rank's compute_ns - mean compute_ns of the other ranks "
            "(imbalance / time_partition); summed over steps / steps",
            metrics={
                "verdict": v.get("verdict"),
                "straggler_rank": straggler,
                "median_ratio": v.get("median_ratio"),
                "excess_ns_total": total,
                "straggler_wait_gpu_ns": v.get("straggler_wait_gpu_ns"),
                **step_metrics(
                    ctx,
                    steps,
                    rec,
                    "no single step is flagged imbalanced (imbalance.balanced): the excess compute is "
                    "spread thinly over the steps",
                ),
            },
            evidence=ev,
            signals=signals,
            fixes=[
                Fix(
                    "Check or replace the slow GPU/node (clocks, thermals, power cap, ECC, "
                    "PCIe/NVLink errors)",
                    "a node out of the pool until fixed: less capacity",
                ),
                Fix(
                    "Balance the work: sequence-length bucketing / packing, even pipeline-stage partitioning",
                    "bucketing changes sampling order (convergence); re-partitioning needs re-validation",
                ),
                Fix("Exclude the straggler from the job", "fewer GPUs: lower peak throughput"),
            ],
        )
    ]
