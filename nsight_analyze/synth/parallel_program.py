"""A 3D-parallel job's layout, communicators and per-rank op program (synth/parallel.py simulates it).

Why: parallel.py's `build` runs an event loop over what every rank issues in one step and writes
the events and the truth; *what* is issued is a separate question: the rank layout (Parallel: rank
= t + T*(d + D*p)), the communicators of each dimension with the bus bandwidth of their link
(NVLink inside a node, the network across nodes), and one rank's step in host issue order (GPipe:
M micro-batches forward then backward, two GEMMs per layer each followed by a tensor-parallel
all-reduce, pipeline send/recv between stages, data-parallel gradient buckets on the NCCL stream,
the optimizer, a final sync; with copy-engine collectives a tensor-parallel AllGather per forward
micro-batch). The module docstring of parallel.py describes the schedule and the NCCL forms.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from . import kernels as K
from . import workload as W

NCCL_SENDRECV = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"
NVLINK_BUSBW = 360e9  # B/s the synthetic transfers reach inside a node
NETWORK_BUSBW = 40e9  # B/s across nodes (one 400 Gb/s NIC per GPU, ~80 %)
MICRO_BATCHES = 2
LAYERS_PER_STAGE = 2
TP_BYTES = 8 * 1024 * 1024
PP_BYTES = 8 * 1024 * 1024
DP_BUCKET_BYTES = 64 * 1024 * 1024
HIDDEN, TOKENS = 4096, 4096


@dataclass(frozen=True)
class Parallel:
    tp: int
    pp: int
    dp: int

    @property
    def ranks(self) -> int:
        return self.tp * self.pp * self.dp

    def coords(self, rank: int) -> tuple[int, int, int]:
        """(t, d, p) of a rank: rank = t + T*(d + D*p)."""
        t = rank % self.tp
        d = (rank // self.tp) % self.dp
        p = rank // (self.tp * self.dp)
        return t, d, p

    def rank(self, t: int, d: int, p: int) -> int:
        return t + self.tp * (d + self.dp * p)

    @property
    def spec(self) -> str:
        return f"tp={self.tp},pp={self.pp},dp={self.dp}"


@dataclass
class Group:
    """One communicator: its dimension, members (global ranks, in communicator-rank order), id."""

    dim: str
    members: tuple[int, ...]
    comm_id: int
    busbw: float

    def comm_text(self, advanced: bool) -> str | int:
        return f"0x{self.comm_id:x}" if advanced else self.comm_id


@dataclass
class Op:
    kind: str  # kernel | coll | sync
    ktype: int = -1
    stream: int = W.COMPUTE_STREAM
    dur: float = 0.0
    group: int = -1  # index into groups (coll)
    key: tuple = ()  # matching key of the instance (coll)
    nbytes: int = 0
    dep: int = -1  # op index whose GPU end this op waits for
    deps: tuple[int, ...] = ()
    peer: int = -1  # comm rank of the point-to-point peer
    name: str = ""  # NCCL API name (AllReduce, Send, Recv)
    api_id: int = 0  # NCCL's apiId of this step's instance (shared by its participants)
    seq: int = 0  # NCCL's seqNumber: the instance's number among (communicator, operation)


def communicators(par: Parallel, gpus_per_node: int) -> tuple[list[Group], dict]:
    """Every communicator of the job and, per (dimension, rank), the index of the rank's group."""
    groups: list[Group] = []
    of: dict[tuple[str, int], int] = {}

    def node_span(members: tuple[int, ...]) -> int:
        return len({m // gpus_per_node for m in members})

    def add(dim: str, members: tuple[int, ...]) -> None:
        bw = NVLINK_BUSBW if node_span(members) == 1 else NETWORK_BUSBW
        groups.append(Group(dim, members, 0x5EED0000 + 7919 * len(groups), bw))
        for m in members:
            of[(dim, m)] = len(groups) - 1

    T, P, D = par.tp, par.pp, par.dp
    if T > 1:
        for p in range(P):
            for d in range(D):
                add("tp", tuple(par.rank(t, d, p) for t in range(T)))
    if P > 1:
        for t in range(T):
            for d in range(D):
                add("pp", tuple(par.rank(t, d, p) for p in range(P)))
    if D > 1:
        for t in range(T):
            for p in range(P):
                add("dp", tuple(par.rank(t, d, p) for d in range(D)))
    return groups, of


def program(
    par: Parallel, rank: int, cat: W.Catalog, groups: list[Group], of: dict, ce: bool = False
) -> list[Op]:
    """One step's ops of one rank, in host issue order."""
    t, d, p = par.coords(rank)
    ops: list[Op] = []
    seq: dict[tuple, int] = {}

    def add(op: Op) -> int:
        ops.append(op)
        return len(ops) - 1

    gemm_fwd = cat.add(K.gemm_kind(K.SM90_GEMM, TOKENS, HIDDEN // par.tp * 3, HIDDEN))
    gemm_fwd2 = cat.add(K.gemm_kind(K.NVJET_TN, TOKENS, HIDDEN, HIDDEN // par.tp * 3))
    gemm_bwd = cat.add(K.gemm_kind(K.NVJET_NT, TOKENS, HIDDEN // par.tp * 3, HIDDEN))
    wgrad = cat.add(K.gemm_kind(K.CUTLASS_WGRAD, HIDDEN, HIDDEN // par.tp * 3, TOKENS))
    ar = cat.add(K.nccl_allreduce(TP_BYTES))
    sendrecv = cat.add(K.KType(NCCL_SENDRECV, K.short_of(NCCL_SENDRECV), "comms", (8, 1, 1), (640, 1, 1), 96))
    dp_ar = cat.add(K.nccl_allreduce(DP_BUCKET_BYTES))
    adam = cat.add(K.mem(K.ADAM, 400 * 1024 * 1024, grid=(640, 1, 1), block=(512, 1, 1)))
    if ce:  # a copy-engine AllGather's transfer: the peers' shares, copied device to device (comms)
        ce_copy = cat.add(
            dataclasses.replace(K.memcpy("DtoD", TP_BYTES * (par.tp - 1), 2, 2), category="comms")
        )
    kinds = cat.kinds

    def kernel(kt: int, **kw) -> int:
        k = kinds[kt]
        dur = K.gemm_ns(k) if k.category == "compute" else K.bytes_ns(k.nbytes)
        return add(Op("kernel", kt, dur=dur, **kw))

    def coll(dim: str, name: str, kt: int, nbytes: int, stream: int = W.COMPUTE_STREAM, **kw) -> int:
        g = of[(dim, rank)]
        n = len(groups[g].members)
        factor = {"AllReduce": 2 * (n - 1) / n, "AllGather": (n - 1) / n}.get(name, 1.0)
        xfer = factor * nbytes / groups[g].busbw * 1e9 + 8_000
        key = (g, name)
        if name in ("Send", "Recv"):
            peer_rank = kw.pop("peer_rank")
            key = (g, min(rank, peer_rank), max(rank, peer_rank))
            kw["peer"] = groups[g].members.index(peer_rank)
        s = seq.get(key, 0)
        seq[key] = s + 1
        return add(Op("coll", kt, stream, xfer, g, key + (s,), nbytes, name=name, seq=s, **kw))

    def tp_layer(g1: int, g2: int) -> int:
        last = kernel(g1)
        if par.tp > 1:
            last = coll("tp", "AllReduce", ar, TP_BYTES)
        last = kernel(g2)
        if par.tp > 1:
            last = coll("tp", "AllReduce", ar, TP_BYTES)
        return last

    prev_stage = par.rank(t, d, p - 1) if p > 0 else -1
    next_stage = par.rank(t, d, p + 1) if p < par.pp - 1 else -1
    for _m in range(MICRO_BATCHES):
        if prev_stage >= 0:
            coll("pp", "Recv", sendrecv, PP_BYTES, peer_rank=prev_stage)
        if ce and par.tp > 1:
            coll("tp", "AllGather", ce_copy, TP_BYTES)
        for _layer in range(LAYERS_PER_STAGE):
            tp_layer(gemm_fwd, gemm_fwd2)
        if next_stage >= 0:
            coll("pp", "Send", sendrecv, PP_BYTES, peer_rank=next_stage)
    buckets: list[int] = []
    for m in range(MICRO_BATCHES):
        if next_stage >= 0:
            coll("pp", "Recv", sendrecv, PP_BYTES, peer_rank=next_stage)
        for layer in range(LAYERS_PER_STAGE):
            last = tp_layer(gemm_bwd, wgrad)
            if par.dp > 1 and m == MICRO_BATCHES - 1 and layer == LAYERS_PER_STAGE // 2 - 1:
                buckets.append(coll("dp", "AllReduce", dp_ar, DP_BUCKET_BYTES, W.NCCL_STREAM, dep=last))
        if prev_stage >= 0:
            coll("pp", "Send", sendrecv, PP_BYTES, peer_rank=prev_stage)
    if par.dp > 1:
        buckets.append(coll("dp", "AllReduce", dp_ar, DP_BUCKET_BYTES, W.NCCL_STREAM, dep=len(ops) - 1))
    for _ in range(2):
        kernel(adam, deps=tuple(buckets))
    add(Op("sync"))
    return ops


def of_index(groups: list[Group], g: Group) -> int:
    return next(i for i, x in enumerate(groups) if x is g)
