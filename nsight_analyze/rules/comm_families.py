"""The communication fixes and how a finding picks them: one list, one way to choose.

Why a module of its own: several places advise on communication and must give the same advice,
so the list and the choice live here, apart from any one finding. The fixes of `exposed-comm`
(rules/comms.py) and of each of its per-dimension children (rules/dimensions.py) come from one
helper, `comm_fixes`: the families (a known dimension, else the collective) that hold most of the
finding's exposed time, so a pipeline job's exposed send/recv gets its schedule's fixes, never DDP
bucketing (issue 52). `FIXES` is the one list of communication fixes: `dominant-kernel`
(rules/dominant_kernel.py, through `kernel_comm_fixes`), `advice.comms_fixes` and the `comms`
command's advice (comms.py) pick from it with `family_fixes` too.
"""

from __future__ import annotations

from typing import Any

from ..store.query_layer import statements
from .base import Ctx, Fix, Signal

SQL = statements("rules/comm_families")

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


def dim_sql(dim: str) -> str:
    return "'" + dim.replace("'", "''") + "'"


# Which fix family a communication operation's exposed time calls for (queries/rules/comm_families.sql,
# `family`: its communicator's dimension when known, else its collective's); comms.py imports it.
FAMILY_SQL = SQL["family"]
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
    ops = SQL["exposed_ops"]
    if dimension is not None:
        ops = SQL.sql("of_dimension", ops=ops, dimension=dim_sql(dimension))
    if name is not None:
        ops = SQL.sql("of_kernel", ops=ops, kernel=dim_sql(name))
    return ctx.rows(SQL.sql("exposed_families", measure=measure, family=FAMILY_SQL, ops=ops))


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
