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

The fixes of `exposed-comm` and of each child come from one helper, `comm_fixes`: the families
(a known dimension, else the collective) that hold most of the finding's exposed time, so a
pipeline job's exposed send/recv gets its schedule's fixes, never DDP bucketing (issue 52).
`FIXES` is the one list of communication fixes: `dominant-kernel` (rules/dominant_kernel.py, through
`kernel_comm_fixes`), `advice.comms_fixes` and the `comms` command's advice (comms.py) pick from it
with `family_fixes` too.
"""

from __future__ import annotations

from typing import Any

from ..comms import nvlink_peak_gbps
from ._common import last_rank_wait_signal, partial_jobs, step_metrics, steps_over
from ._whatif import whatif_gain
from .base import Ctx, Evidence, Finding, Fix, Signal

PARENT = "exposed-comm"
NAMES = {
    "dp": "Data-parallel (DP)",
    "fsdp": "FSDP / ZeRO sharded-parameter",
    "tp": "Tensor-parallel (TP)",
    "pp": "Pipeline-parallel (PP)",
    "ep": "Expert-parallel (EP)",
    "unknown": "Communication of unknown dimension",
}
_P2P_OVERLAP = Fix(
    "Batch the point-to-point transfers (torch.distributed.batch_isend_irecv: one NCCL group call) and "
    "post them ahead of use on a communication stream, so they overlap compute instead of blocking it",
    "the receive buffers stay allocated longer; the consumer must wait on the transfer's work handle",
)
_NCCL_TUNING = Fix(
    "Tune NCCL (NCCL_ALGO/PROTO, channels) or the topology (NVLink/IB placement)",
    "settings are topology specific; hardware changes cost money",
)
FIXES: dict[str, list[Fix]] = {
    "tp": [
        Fix(
            "Keep each TP group inside one node (NVLink): order the ranks so that TP is the innermost "
            "dimension (Megatron's default), and lower the TP degree if it spans nodes",
            "a smaller TP degree puts more weights and activations on each GPU; a larger PP or DP "
            "degree takes the freed GPUs",
        ),
        Fix(
            "Overlap TP communication with compute: sequence parallelism with communication/GEMM overlap "
            "(Transformer Engine / Megatron tp-comm-overlap, userbuffers)",
            "needs spare SMs and memory for the staged buffers; gains shrink for small hidden sizes",
        ),
    ],
    "dp": [
        Fix(
            "Overlap gradient reduction with backward (DDP/FSDP bucketed reduce started as gradients "
            "become ready; Megatron overlap-grad-reduce) and tune the bucket size (bucket_cap_mb)",
            "larger buckets cut per-call latency but start later and overlap less; smaller ones overlap "
            "more but pay more launches",
        ),
        Fix(
            "Reduce fewer bytes less often: bf16 gradient reduction, gradient accumulation with no_sync() "
            "on the inner micro-batches",
            "bf16 reduction can cost accuracy; accumulation changes the effective batch (re-tune the "
            "learning rate)",
        ),
    ],
    "fsdp": [
        Fix(
            "Prefetch the next unit's all-gather (forward_prefetch, backward_prefetch=BACKWARD_PRE) and "
            "limit the all-gathers in flight (limit_all_gathers) so they overlap compute",
            "prefetching holds more unsharded parameters in memory",
        ),
        Fix(
            "Use larger FSDP units, or shard inside a node and replicate across nodes (HSDP)",
            "larger units hold more unsharded parameters; HSDP keeps more copies of the optimizer state",
        ),
    ],
    "pp": [
        Fix(
            "More micro-batches per step (the pipeline bubble is (stages - 1) / micro-batches of the step)",
            "a smaller micro-batch lowers GEMM efficiency, or more micro-batches in flight need more "
            "activation memory",
        ),
        Fix(
            "An interleaved (virtual-pipeline) 1F1B schedule, or fewer pipeline stages",
            "interleaving multiplies the point-to-point messages; fewer stages need more memory per GPU",
        ),
        _P2P_OVERLAP,
    ],
    # send/recv of a communicator whose dimension is unknown: most often pipeline-stage transfers
    "p2p": [
        Fix(
            "If these send/recv are pipeline-stage transfers: more micro-batches per step, or an "
            "interleaved (virtual-pipeline) 1F1B schedule, so the bubble (stages - 1) / micro-batches "
            "shrinks",
            "smaller micro-batches lower GEMM efficiency, more in flight need more activation memory; "
            "interleaving multiplies the point-to-point messages",
        ),
        _P2P_OVERLAP,
        Fix(
            "If they make up an all-to-all (PyTorch all_to_all runs as grouped NCCL send/recv: expert or "
            "embedding exchange): balance what each rank sends (router capacity factor, sharding plan) and "
            "overlap dispatch/combine with compute",
            "a lower capacity factor drops tokens; a new sharding plan needs re-validation",
        ),
    ],
    "ep": [
        Fix(
            "Balance the router load: capacity factor, auxiliary load-balancing loss; keep the EP group "
            "inside a node",
            "a lower capacity factor drops tokens; a smaller EP group holds more experts per GPU",
        ),
        Fix(
            "Hierarchical all-to-all (intra-node first, then across nodes) and dispatch/combine overlapped "
            "with expert compute (chunked dispatch, DeepEP-style kernels)",
            "chunking means more launches; specialised kernels tie the job to a library and topology",
        ),
    ],
    "broadcast": [
        Fix(
            "Broadcast less often: DDP broadcast_buffers=False when the buffers need no per-step sync, "
            "broadcast inputs and parameters once and keep them on the GPU",
            "buffers (e.g. BatchNorm running statistics) drift apart between replicas",
        ),
    ],
    "unknown": [
        Fix(
            "Name the process groups (torch.distributed new_group(group_desc=...)) or trace NCCL with its "
            "NVTX payload so the dimension can be known, then apply that dimension's fixes",
            "none: a capture setting",
        ),
    ],
}


def _where(ctx: Ctx) -> str:
    return "step IS NOT NULL" if ctx.has_steps else "step IS NULL"


def _parent_recoverable(ctx: Ctx) -> int | None:
    """The `exposed-comm` finding's recoverable time per step (rules/comms.py's measure), or None."""
    total = ctx.scalar(
        "SELECT sum(r) FROM (SELECT min(recoverable_ns) AS r FROM diag_comm_recoverable GROUP BY step)"
    )
    return None if total is None else ctx.per_step(float(total))


def _dim_sql(dim: str) -> str:
    return "'" + dim.replace("'", "''") + "'"


def breakdown_evidence(ctx: Ctx) -> Evidence | None:
    """The per-dimension split of the exposed communication, for the `exposed-comm` finding."""
    if not ctx.has("diag_comm_dimension", "comm_groups"):
        return None
    return ctx.evidence(
        "per parallelism dimension",
        "Per dimension (comm_groups): total, exposed time and bytes summed over ranks, bus bandwidth, the "
        "link; and per step the critical rank's overlap-recoverable part (diag_comm_dimension), "
        "summed over steps / steps.",
        f"""SELECT g.dimension, g.communicators, g.link, g.total_ns, g.exposed_ns, g.bytes,
                   round(g.busbw_gbps, 1) AS busbw_gbps, r.recoverable_ns_per_step
            FROM (SELECT dimension, count(*) AS communicators, string_agg(DISTINCT link, ',') AS link,
                         sum(total_ns)::BIGINT AS total_ns, sum(exposed_ns)::BIGINT AS exposed_ns,
                         sum(bytes)::BIGINT AS bytes,
                         sum(busbw_gbps * total_ns)
                             / nullif(sum(total_ns) FILTER (WHERE busbw_gbps IS NOT NULL), 0) AS busbw_gbps
                  FROM comm_groups GROUP BY dimension) AS g
            LEFT JOIN (SELECT dimension,
                              round(sum(r) / {max(ctx.n_steps, 1)})::BIGINT AS recoverable_ns_per_step
                       FROM (SELECT dimension, step, min(recoverable_ns) AS r FROM diag_comm_dimension
                             WHERE {_where(ctx)} GROUP BY dimension, step) GROUP BY dimension) AS r
                 USING (dimension)
            ORDER BY g.exposed_ns DESC""",
    )


# Which fixes a communication operation's exposed time calls for: its communicator's dimension when
# known, else its collective's (an all-reduce is most often gradient reduction, all-gather and
# reduce-scatter sharded parameters, all-to-all expert exchange, send/recv pipeline stages); a
# kernel that is not NCCL's by its name: symmetric-memory / custom all-reduce, all-gather and
# reduce-scatter kernels (vLLM, TensorRT-LLM, PyTorch async TP, Megatron multimem) serve tensor
# parallelism, DeepEP expert parallelism, a peer copy is point-to-point.
FAMILY_SQL = """CASE WHEN dimension IN ('dp', 'fsdp', 'tp', 'pp', 'ep') THEN dimension
     WHEN op IN ('AllReduce', 'Reduce') THEN 'dp'
     WHEN op IN ('ReduceScatter', 'AllGather', 'AllGatherV') THEN 'fsdp'
     WHEN op = 'AllToAll' THEN 'ep'
     WHEN op = 'SendRecv' THEN 'p2p'
     WHEN op = 'Broadcast' THEN 'broadcast'
     WHEN regexp_matches(op, '(?i)all_?to_?all|deep_ep::') THEN 'ep'
     WHEN regexp_matches(op, '(?i)all_?reduce|all_?gather|reduce_?scatter|multimem') THEN 'tp'
     WHEN op LIKE '[CUDA memcpy %' THEN 'p2p'
     ELSE 'other' END"""
FAMILY_NAMES = {
    "dp": "gradient reduction, data parallel",
    "fsdp": "sharded parameters, FSDP / ZeRO",
    "tp": "tensor parallel",
    "pp": "pipeline parallel",
    "ep": "expert parallel",
    "p2p": "point-to-point, dimension unknown",
    "broadcast": "broadcast",
    "other": "other communication",
}
DOMINANT_SHARE = 0.8  # families are taken, largest first, until they hold this share of the exposed time
MINOR_SHARE = 0.1  # ... but none below this share (the largest is always taken)


def exposed_families(
    ctx: Ctx, dimension: str | None = None, name: str | None = None, measure: str = "exposed_ns"
) -> list[dict[str, Any]]:
    """The exposed communication time by fix family, largest first: rows (family, ops, dimensions,
    exposed_ns, share) over diag_comm_exposure (one dimension's operations when `dimension`, one
    kernel name's when `name`). `measure` "duration_ns" weighs the operations by their whole time
    (the `dominant-kernel` finding is about a kernel's time, not only its exposed part); the sum is
    still in the column `exposed_ns`."""
    if not ctx.has("diag_comm_exposure"):
        return []
    if measure not in ("exposed_ns", "duration_ns"):
        raise ValueError(f"unknown measure {measure!r}")
    conds = [
        f"{col} = {_dim_sql(v)}" for col, v in (("dimension", dimension), ("name", name)) if v is not None
    ]
    where = "WHERE " + " AND ".join(conds) if conds else ""
    return ctx.rows(
        f"""SELECT family, string_agg(DISTINCT op, ',' ORDER BY op) AS ops,
                   string_agg(DISTINCT coalesce(dimension, 'none'), ',' ORDER BY coalesce(dimension, 'none'))
                       AS dimensions,
                   sum({measure})::BIGINT AS exposed_ns,
                   sum({measure}) / nullif(sum(sum({measure})) OVER (), 0) AS share
            FROM (SELECT *, {FAMILY_SQL} AS family FROM diag_comm_exposure {where})
            GROUP BY family HAVING sum({measure}) > 0
            ORDER BY exposed_ns DESC, family"""
    )


def family_fixes(fams: list[dict[str, Any]], dimension: str | None = None) -> list[Fix]:
    """The fixes of the families that hold most of the time in `fams` (rows with family, share and
    dimensions, largest first; each gets `taken`).

    Why apart from `comm_fixes`: the `comms` command (comms.py, families per dimension from
    comm_ops) and the `dominant-kernel` finding pick from the same list by the same shares, so no
    place keeps its own advice. Families are taken largest first until DOMINANT_SHARE, none below
    MINOR_SHARE but the largest; an unknown dimension adds how to make it known; NCCL settings close
    the job-wide list (`dimension` None).
    """
    fixes: list[Fix] = []
    held = 0.0
    for i, f in enumerate(fams):
        share = float(f["share"] or 0)
        f["taken"] = i == 0 or (held < DOMINANT_SHARE and share >= MINOR_SHARE)
        if not f["taken"]:
            continue
        held += share
        fixes.extend(x for x in FIXES.get(str(f["family"]), []) if x not in fixes)
    if (
        any(f["taken"] and "unknown" in str(f["dimensions"]).split(",") for f in fams)
        or dimension == "unknown"
    ):
        fixes.extend(x for x in FIXES["unknown"] if x not in fixes)
    if dimension is None:
        fixes.append(_NCCL_TUNING)
    return fixes


def comm_fixes(ctx: Ctx, dimension: str | None = None) -> tuple[list[Fix], list[dict[str, Any]]]:
    """The fixes of the collectives/dimensions that make up most of the exposed time, and the
    families they came from (`exposed_families` rows, each with `taken`).

    Why one helper: `exposed-comm` and its per-dimension children must give the fixes of the
    communication that is exposed (a pipeline job's send/recv: its schedule, never DDP buckets), and
    judge them alike (`family_fixes`).
    """
    fams = exposed_families(ctx, dimension)
    return family_fixes(fams, dimension), fams


# a comms kernel's name-rule subcategory (data/kernel_rules.csv) -> fix family, where no
# diag_comm_exposure row says more (FAMILY_SQL's reading of the collective, without a dimension)
SUBCATEGORY_FAMILY = {
    "allreduce": "dp",
    "reduce": "dp",
    "reducescatter": "fsdp",
    "allgather": "fsdp",
    "alltoall": "ep",
    "sendrecv": "p2p",
    "p2p": "p2p",
    "broadcast": "broadcast",
}


def subcategory_fixes(subcategory: str | None = None) -> list[Fix]:
    """The fixes of a comms kernel known only by its name-rule subcategory: its collective's family
    (an unknown one: how to make the dimension known), then NCCL settings."""
    fam = SUBCATEGORY_FAMILY.get((subcategory or "").lower())
    return family_fixes(
        [{"family": fam or "other", "share": 1.0, "dimensions": "none" if fam else "unknown"}]
    )


def kernel_comm_fixes(
    ctx: Ctx, name: str, subcategory: str | None = None
) -> tuple[list[Fix], list[dict[str, Any]]]:
    """The fixes of one communication kernel (the `dominant-kernel` finding): the families of its
    operations in diag_comm_exposure (its collective, its communicator's dimension where known),
    weighed by their time, so a SendRecv kernel gets point-to-point fixes, never DDP bucketing;
    without those rows, its name-rule subcategory's (`subcategory_fixes`)."""
    fams = exposed_families(ctx, name=name, measure="duration_ns")
    if not fams:
        return subcategory_fixes(subcategory), []
    return family_fixes(fams), fams


def family_signal(fams: list[dict[str, Any]]) -> Signal | None:
    """The largest family's share of the exposed time: what the fixes are chosen for."""
    if not fams:
        return None
    top = fams[0]
    return Signal(
        "largest share of the exposed communication",
        round(100.0 * float(top["share"] or 0), 1),
        "% of exposed",
        "neutral",
        f"{top['family']} ({top['ops']}; dimension {top['dimensions']}); the fixes follow the families "
        "that hold most of the exposed time: "
        + ", ".join(f"{f['family']} {100.0 * float(f['share'] or 0):.1f} %" for f in fams),
    )


def comm_by_dimension(ctx: Ctx) -> list[Finding]:
    """One finding per parallelism dimension whose exposed communication overlap could recover."""
    if not ctx.has("diag_comm_dimension", "comm_groups", "diag_comm_recoverable"):
        return []
    parent = _parent_recoverable(ctx)
    if parent is None or (ctx.pct(parent) or 0) < ctx.th["exposed_comm_min_pct"]:
        return []  # no exposed-comm finding: nothing to break down
    dims = ctx.column("SELECT DISTINCT dimension FROM comm_groups WHERE total_ns > 0")
    if len(dims) < 2:
        return []  # one dimension: exposed-comm is its finding (with the breakdown as evidence)
    per = ctx.rows(
        f"""SELECT d.dimension, d.step, min(d.recoverable_ns) AS rec, max(w.step_ns) AS step_ns
            FROM diag_comm_dimension AS d
            JOIN (SELECT step, max(window_ns) AS step_ns FROM diag_windows GROUP BY step) AS w
              ON w.step IS NOT DISTINCT FROM d.step
            WHERE d.{_where(ctx)} GROUP BY d.dimension, d.step"""
    )
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
    d = _dim_sql(dim)
    if gain is not None and gain >= 0:
        rec = min(own, int(gain))
        source = "whatif comms-hidden" if gain < own else "exposed"
    else:
        rec, source = own, "exposed"
    g = ctx.row(
        f"""SELECT count(*) AS communicators, string_agg(DISTINCT link, ',' ORDER BY link) AS link,
                   sum(total_ns)::BIGINT AS total_ns, sum(exposed_ns)::BIGINT AS exposed_ns,
                   sum(bytes)::BIGINT AS bytes,
                   sum(busbw_gbps * total_ns) / nullif(sum(total_ns) FILTER (WHERE busbw_gbps IS NOT NULL), 0)
                       AS busbw_gbps
            FROM comm_groups WHERE dimension = {d}"""
    )
    w = ctx.row(
        f"""SELECT sum(exposed_ns) AS exposed, sum(exposed_wait_ns) AS wait, sum(last_transfer_ns) AS last,
                   sum(unknown_wait_ns)
                       + coalesce(sum(last_transfer_ns) FILTER (WHERE NOT last_transfer_known), 0) AS unknown
            FROM diag_comm_dimension WHERE dimension = {d} AND {_where(ctx)}"""
    )
    steps = steps_over(rows, th)
    ranks = ctx.column(
        f"""SELECT DISTINCT d.rank FROM diag_comm_dimension AS d
            JOIN diag_windows AS w ON w.rank = d.rank AND w.step IS NOT DISTINCT FROM d.step
            WHERE d.dimension = {d} AND d.{_where(ctx)}
              AND 100.0 * d.recoverable_ns / nullif(w.window_ns, 0) >= {th} ORDER BY 1"""
    )
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
                f"""SELECT group_key, basis, ops, size, members, hosts, link, kernels, total_ns, exposed_ns,
                           bytes, round(busbw_gbps, 1) AS busbw_gbps
                    FROM comm_groups WHERE dimension = {d} ORDER BY exposed_ns DESC, group_key""",
            ),
            ctx.evidence(
                f"{dim} exposed communication per step",
                "Per step: the critical rank's overlap-recoverable part (min over ranks), the largest "
                "exposed time, wait for the last arrival and last-reduction transfer (NULL when not "
                "measured: participants missing), the exposed time whose wait was not measured "
                "(diag_comm_dimension).",
                f"""SELECT step, min(recoverable_ns) AS recoverable_ns,
                           arg_min(rank, recoverable_ns) AS critical_rank, max(exposed_ns) AS max_exposed_ns,
                           CASE WHEN bool_and(unknown_wait_ns = 0 AND last_transfer_known)
                                THEN max(exposed_wait_ns) END AS max_exposed_wait_ns,
                           CASE WHEN bool_and(last_transfer_known) THEN max(last_transfer_ns) END
                               AS max_last_transfer_ns,
                           max(unknown_wait_ns) AS max_unknown_wait_ns, sum(kernels) AS kernels
                    FROM diag_comm_dimension WHERE dimension = {d} AND {_where(ctx)}
                    GROUP BY step ORDER BY step""",
            ),
        ],
        signals=signals,
        fixes=comm_fixes(ctx, dim)[0],
    )
