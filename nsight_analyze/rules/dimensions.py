"""Exposed communication by parallelism dimension: the children of the `exposed-comm` finding.

Why children, not a second finding: `exposed-comm` (rules/comms.py) says how much better overlap
could recover; which dimension's communication that is decides the fix (TP: keep it inside a node
or overlap it; DP: buckets; PP: more micro-batches). Both measure the same time, so a dimension is
reported only when `exposed-comm` is (same gate, same overlap-recoverable measure split by the
dimension of each NCCL kernel: queries/diagnose/diag_comm_dimension.sql), and only in a job with several
dimensions: with one, `exposed-comm` already is that dimension's finding and carries the
breakdown as evidence (`breakdown_evidence`). A child names its parent in `metrics.parent`; the
dimensions' own parts add up to at most the parent's own measure, each child is at most the parent
(never add them to it: docs/diagnose.md).

The fixes of `exposed-comm` and of each child come from rules/comm_families.py (`comm_fixes`), the
one list of communication fixes.
"""

from __future__ import annotations

from typing import Any

from ..comms import DIMENSIONS, nvlink_peak_gbps
from ..store.query_layer import statements
from ._common import last_rank_wait_signal, partial_jobs, step_metrics, steps_over
from ._whatif import whatif_gain
from .base import Ctx, Evidence, Finding, Signal
from .comm_families import comm_fixes, dim_sql
from .declare import Cause, Doc, Threshold, finding

SQL = statements("rules/dimensions")
PARENT = "exposed-comm"
NAMES = {
    "dp": "Data-parallel (DP)",
    "fsdp": "FSDP / ZeRO sharded-parameter",
    "tp": "Tensor-parallel (TP)",
    "pp": "Pipeline-parallel (PP)",
    "ep": "Expert-parallel (EP)",
    "unknown": "Communication of unknown dimension",
}


def _parent_recoverable(ctx: Ctx) -> int | None:
    """The `exposed-comm` finding's recoverable time per step (rules/comms.py's measure), or None."""
    total = ctx.scalar(SQL["parent_recoverable"])
    return None if total is None else ctx.per_step(float(total))


def breakdown_evidence(ctx: Ctx) -> Evidence | None:
    """The per-dimension split of the exposed communication, for the `exposed-comm` finding."""
    if not ctx.has("diag_comm_dimension", "comm_groups"):
        return None
    return ctx.evidence(
        "per parallelism dimension",
        "Per dimension (comm_groups): total, exposed time and bytes summed over ranks, bus bandwidth, the "
        "link; and per step the critical rank's overlap-recoverable part (diag_comm_dimension), "
        "summed over steps / steps.",
        SQL.sql("breakdown", steps=max(ctx.n_steps, 1), where=ctx.in_steps),
    )


@finding(
    *(f"exposed-comm-{d}" for d in DIMENSIONS),
    doc=Doc(
        what=(
            "children of `exposed-comm` (`metrics.parent`), only when it is reported and the job's NCCL "
            "kernels span several parallelism dimensions (`comm_groups`): one per dimension, with its "
            "communicators (total, exposed, bytes, bus bandwidth against the link: NVLink peak from the "
            "GPU table, the network's unknown), its per-step exposed time and fixes that fit the "
            "dimension (TP: keep TP inside a node, sequence-parallel overlap; DP: overlap gradient "
            "reduction, bucket size; FSDP: prefetch, limit all-gathers; PP: more micro-batches, "
            "interleaved schedule, batched p2p overlapped with compute; EP: capacity factor, "
            "hierarchical all-to-all; `unknown`: its collectives' fixes and how to name the groups). "
            "With one dimension `exposed-comm` itself carries the split (evidence `per parallelism "
            "dimension`) and its fixes follow what its exposed time is made of"
        ),
        source="`diag_comm_dimension`, `comm_groups`, `whatif`",
        recoverable=(
            "the smaller of: per step, min over the dimension's ranks of its exposed - exposed wait - "
            "the last reduction's transfer (the parent's measure split by dimension, so the children's "
            "own parts never add up to more than the parent's own measure; each child is at most the "
            "parent), summed / steps; and the `comms-hidden` what-if gain (all dimensions at once); "
            "`metrics.recoverable_source` says which (`exposed` or `whatif comms-hidden`); reported "
            "when >= `dimension_comm_min_pct`"
        ),
    ),
    shown="`exposed-comm-<dim>` (`dp`, `fsdp`, `tp`, `pp`, `ep`, `unknown`)",
    thresholds={
        "dimension_comm_min_pct": Threshold(
            3.0,
            (
                "with exposed-comm reported in a job of several parallelism dimensions: report a dimension "
                "when its overlap-recoverable part is >= this % of the mean step"
            ),
        ),
    },
    reads=("comm_groups", "diag_comm_dimension", "diag_comm_recoverable", "diag_windows", "whatif"),
    causes=tuple(
        Cause(
            f"exposed-comm-{d}",
            (f"exposed-comm-{d}",),
            f"Exposed communication of the {d} dimension",
            "ns_per_step",
            threshold="dimension_comm_min_pct",
        )
        for d in DIMENSIONS
    ),
)
def comm_by_dimension(ctx: Ctx) -> list[Finding]:
    """One finding per parallelism dimension whose exposed communication overlap could recover."""
    if not ctx.has("diag_comm_dimension", "comm_groups", "diag_comm_recoverable"):
        return []
    parent = _parent_recoverable(ctx)
    if parent is None or (ctx.pct(parent) or 0) < ctx.th["exposed_comm_min_pct"]:
        return []  # no exposed-comm finding: nothing to break down
    dims = ctx.column(SQL["dimensions"])
    if len(dims) < 2:
        return []  # one dimension: exposed-comm is its finding (with the breakdown as evidence)
    per = ctx.rows(SQL.sql("recoverable_per_dimension_step", where=ctx.in_steps))
    gain, _ = whatif_gain(ctx, "comms-hidden")  # all dimensions at once: a bound for each
    nvlink, nvlink_why = nvlink_peak_gbps(ctx.con)
    th = ctx.th["dimension_comm_min_pct"]
    out = []
    for dim in sorted({r["dimension"] for r in per if r["dimension"] is not None}):
        rows = [r for r in per if r["dimension"] == dim]
        own = ctx.per_step(float(sum(r["rec"] for r in rows if r["rec"] is not None)))
        if (ctx.pct(own) or 0) < th:
            continue
        out.append(_finding(ctx, str(dim), rows, own, parent, gain, nvlink, nvlink_why, th))
    return out


def _finding(
    ctx: Ctx,
    dim: str,
    rows: list[dict[str, Any]],
    own: int,
    parent: int,
    gain: Any,
    nvlink: float | None,
    why: str,
    th: float,
) -> Finding:
    d = dim_sql(dim)
    if gain is not None and gain >= 0:
        rec = min(own, int(gain))
        source = "whatif comms-hidden" if gain < own else "exposed"
    else:
        rec, source = own, "exposed"
    where = ctx.in_steps
    g = ctx.row(SQL.sql("dimension_totals", dimension=d))
    w = ctx.row(SQL.sql("dimension_waits", dimension=d, where=where))
    steps = steps_over(rows, th)
    ranks = ctx.column(SQL.sql("dimension_ranks", dimension=d, where=where, th=th))
    link = str(g["link"]) if g["link"] is not None else "unknown"
    bw = float(g["busbw_gbps"]) if g["busbw_gbps"] is not None else None
    peak = nvlink if link == "nvlink" else None
    exposed = float(w["exposed"] or 0)
    wait = float(w["wait"] or 0)
    signals = [
        Signal(
            f"{dim} bus bandwidth",
            None if bw is None else round(bw, 1),
            "GB/s",
            "neutral",
            f"time-weighted mean over its collectives (comm_groups.busbw_gbps) on {link}",
        ),
        Signal(
            f"{link} peak",
            peak,
            "GB/s",
            "supports" if bw is not None and peak and bw < 0.5 * peak else "neutral",
            (f"{why}; bus bandwidth at {100.0 * bw / peak:.0f} % of it" if bw is not None and peak else why)
            if link == "nvlink"
            else "unknown: the traces do not record the network's speed",
        ),
        last_rank_wait_signal(
            wait,
            exposed,
            "waiting for a late rank (for PP: the neighbouring stage, the pipeline bubble) is excluded "
            "from the recoverable time",
            float(w["unknown"] or 0),
            partial_jobs(ctx),
        ),
        Signal(
            "what-if: every dimension's communication hidden",
            None if gain is None else int(gain),
            "ns per step",
            "neutral",
            "whatif comms-hidden gain (whole job; all dimensions at once): an upper bound of one "
            "dimension's gain"
            if gain is not None
            else "unknown: the what-if replay has no rows (docs/whatif.md)",
        ),
    ]
    total = int(g["total_ns"] or 0)
    bytes_ = int(g["bytes"]) if g["bytes"] is not None else None
    summary = (
        f"{NAMES.get(dim, dim)} collectives: {rec / 1e6:.3f} ms per step ({ctx.pct(rec)} % of the mean step) "
        f"could be overlapped, of the {parent / 1e6:.3f} ms of the exposed-comm finding. Over ranks: "
        f"{total / 1e6:.3f} ms of {dim} communication, {int(g['exposed_ns'] or 0) / 1e6:.3f} ms exposed, "
        f"{'unknown bytes' if bytes_ is None else f'{bytes_ / 1e9:.3f} GB'}, bus bandwidth "
        f"{'unknown' if bw is None else f'{bw:.1f} GB/s'} on {link}"
        + (f" (peak {peak:g} GB/s)." if peak else " (peak unknown).")
    )
    method = (
        f"the smaller of: this dimension's overlap-recoverable exposed time (per step, min over its ranks of "
        f"exposed - exposed wait for the last arrival - exposed transfer of the step's last reduction, "
        f"diag_comm_dimension; summed over steps / steps: {own} ns) and the what-if gain with all "
        f"communication hidden (whatif comms-hidden, whole job: "
        f"{'unknown' if gain is None else f'{int(gain)} ns'}); here: {source}"
    )
    return ctx.finding(
        id=f"{PARENT}-{dim}",
        title=f"{NAMES.get(dim, dim)} communication is exposed",
        kind="performance",
        summary=summary,
        ranks=[int(r) for r in ranks],
        steps=steps,
        recoverable_ns_per_step=rec,
        recoverable_method=method,
        metrics={
            "parent": PARENT,
            "dimension": dim,
            "recoverable_source": source,
            "dimension_recoverable_ns_per_step": own,
            "whatif_comms_hidden_gain_ns": None if gain is None else int(gain),
            "parent_recoverable_ns_per_step": parent,
            "communicators": int(g["communicators"]),
            "total_ns": total,
            "exposed_ns": int(g["exposed_ns"] or 0),
            "bytes": bytes_,
            "busbw_gbps": bw,
            "link": link,
            "link_peak_gbps": peak,
            "threshold_pct": th,
            **step_metrics(ctx, steps, rec),
        },
        evidence=[
            ctx.evidence(
                f"{dim} communicators",
                "Each communicator of the dimension (comm_groups): why that dimension, its members, hosts "
                "and link, total and exposed time and bytes over ranks, bus bandwidth.",
                SQL.sql("communicators", dimension=d),
            ),
            ctx.evidence(
                f"{dim} exposed communication per step",
                "Per step: the critical rank's overlap-recoverable part (min over ranks), the largest "
                "exposed time, wait for the last arrival and last-reduction transfer (NULL when not "
                "measured: participants missing), the exposed time whose wait was not measured "
                "(diag_comm_dimension).",
                SQL.sql("exposed_per_step", dimension=d, where=where),
            ),
        ],
        signals=signals,
        fixes=comm_fixes(ctx, dim)[0],
    )
