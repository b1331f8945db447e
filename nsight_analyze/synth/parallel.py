"""A 3D-parallel (tensor x pipeline x data) transformer job, for `synth --parallel tp=T,pp=P,dp=D`.

Rank layout (Megatron's default order, tensor parallel fastest): rank = t + T*(d + D*p) for
tensor index t, data-parallel replica d and pipeline stage p. Tensor-parallel groups are T
consecutive ranks and must fit in a node; the pipeline stages exchange activations (forward) and
gradients (backward) by send/recv between stage p and p+1 of the same (t, d); each stage's
data-parallel group of D replicas all-reduces the gradients in two buckets on a second stream
(the first one overlaps the last micro-batch's backward, the second runs after it).
synth/parallel_program.py builds the layout, the communicators and each rank's step program;
this module simulates them and writes the events, the NCCL ranges and the truth.

Schedule (GPipe): M micro-batches forward, then M backward, per stage L layers; every layer runs
two GEMMs, each followed by a tensor-parallel all-reduce on the compute stream (on the critical
path, as in Megatron without sequence parallelism). The step ends with the optimizer and a
stream synchronisation.

Collectives couple their participants only: a collective's transfer starts when its last
participant arrives; the simulation is a small event loop over the ranks' streams (this is the
generator, not an analysis). Every NCCL launch has NCCL's NVTX range with a JSON payload: the
legacy form (`ncclAllReduce`, "NCCL communicator ID", "Message size [bytes]", "Peer rank", and
`ncclCommInitRank` with "Rank" / "No. of ranks") or, with `--nccl-trace`, the advanced NCCL trace
form of Nsight Systems 2025.6.1+ ("NVIDIA NCCL Trace": ranges named without the nccl prefix,
`AllReduce` / `Send` / `Recv` inside an `API Group` range, `CommInit` markers; payload keys
`apiId` (shared by all participants of one operation), `commHash`, `rank`, `nRanks`, `peer`,
`msgSize`, `seqNumber`).

The advanced form follows the documents (docs/metrics.md "Collectives"; no real capture has confirmed
it): each call's `API Group` range (`apiGroupId`, `group`) holds the API range (`AllReduce`, ...: the
enqueue, carrying `apiId` and `apiGroupId`) and then a `GroupLaunch` range around a `KernelLaunch`
range (`apiGroupId` only) around the launch call, so the kernel's innermost range names its group,
not its operation. With `ce_collectives`, every forward micro-batch of a tensor-parallel rank starts
with a copy-engine AllGather (NCCL >= 2.28/2.29 `ce-coll`): its transfer is a device-to-device memcpy
issued inside a `CE Batch` range after a `CE Sync` range, no kernel; the truth counts it as
communication (its catalog category is comms) but not in `by_dimension` (NCCL kernels only; the
per-instance truth and `comms_by_dimension_with_ce` count it: synth/nccl_instances.py).
"""

from __future__ import annotations

import json
import re

import numpy as np

from ..errors import UserError
from . import nccl_instances as _instances
from . import workload as W
from .job import UTC_BASE_NS, Job, RankEvents
from .nccl_instances import uncovered
from .parallel_program import NVLINK_BUSBW, Group, Op, Parallel, communicators, of_index, program

DIMENSIONS = ("dp", "fsdp", "tp", "pp", "ep", "unknown")


def parse_parallel(text: str | None) -> Parallel | None:
    """'tp=2,pp=2,dp=2' -> Parallel (missing sizes are 1); None for None or ''."""
    if not text:
        return None
    sizes = {"tp": 1, "pp": 1, "dp": 1}
    for part in text.split(","):
        m = re.fullmatch(r"\s*(tp|pp|dp)\s*=\s*(\d+)\s*", part)
        if not m or int(m.group(2)) < 1:
            raise UserError(
                f"bad --parallel {text!r}: use tp=T,pp=P,dp=D with sizes >= 1, e.g. tp=2,pp=2,dp=2"
            )
        sizes[m.group(1)] = int(m.group(2))
    return Parallel(**sizes)


def build(cfg: W.Config, par: Parallel, advanced: bool, ce_colls: bool = False) -> tuple[Job, dict]:
    """The job's per-rank events (true-time simulation shifted onto node clocks) and its truth.

    ce_colls: copy-engine AllGathers (advanced form only), see the module docstring."""
    if par.ranks != cfg.ranks:
        raise UserError(f"--parallel {par.spec} makes {par.ranks} ranks, not {cfg.ranks}")
    if cfg.gpus_per_node % par.tp:
        raise UserError(
            f"tensor-parallel groups of {par.tp} ranks must fit in a node of {cfg.gpus_per_node} GPUs"
        )
    rng = np.random.default_rng(cfg.seed)
    R, nodes = cfg.ranks, cfg.nodes
    session = np.zeros(nodes, np.int64)
    if nodes > 1:
        session[1:] = np.arange(1, nodes) * 1_300_000 + rng.integers(0, 700_000, nodes - 1)
    utc = UTC_BASE_NS + session
    cat = W.Catalog()
    groups, of = communicators(par, cfg.gpus_per_node)
    programs = [program(par, r, cat, groups, of, ce_colls) for r in range(R)]
    kinds = cat.kinds

    texts = [f"ProfilerStep#{cfg.first_step + i}" for i in range(cfg.steps)] + ["NCCL"]
    tix = {s: j for j, s in enumerate(texts)}

    def text(s: str) -> int:
        if s not in tix:
            tix[s] = len(texts)
            texts.append(s)
        return tix[s]

    host = 350_000_000 + int(session.max()) + rng.integers(0, 300_000, R)
    free = np.repeat(host[:, None], 2, axis=1).astype(np.int64)
    gpu: list[list[tuple]] = [[] for _ in range(R)]  # (start, end, ktype, stream, corr)
    api: list[list[tuple]] = [[] for _ in range(R)]  # (start, end, name, corr, tid, sync)
    nvtx: list[list[tuple]] = [[] for _ in range(R)]  # (start, end, text, tid, type, domain, payload)
    corr = np.ones(R, np.int64)
    api_id = [1]
    dims = {dim: {"total_ns": 0, "exposed_ns": 0} for dim in DIMENSIONS}
    coll_kernels: list[list[tuple[int, int, str]]] = [[] for _ in range(R)]
    operations: dict[int, dict] = {}  # apiId -> the instance's op, communicator, (rank, correlation id)s

    # communicator creation: one init record per communicator and member
    for g in groups:
        for cr, r in enumerate(g.members):
            s = int(host[r]) - 40_000_000 + 10_000 * of_index(groups, g)
            if advanced:
                payload = {"commHash": g.comm_text(True), "rank": cr, "nRanks": len(g.members)}
                nvtx[r].append((s, s + 2_000, text("CommInit"), W.MAIN_TID, 59, 1, json.dumps(payload)))
            else:
                payload = {"NCCL communicator ID": g.comm_id, "Rank": cr, "No. of ranks": len(g.members)}
                nvtx[r].append(
                    (s, s + 50_000, text("ncclCommInitRank"), W.MAIN_TID, 59, 1, json.dumps(payload))
                )

    for step_i in range(cfg.steps):
        step = cfg.first_step + step_i
        push = host + rng.integers(20_000, 45_000, R)
        host = push.copy()
        n_ops = [len(p) for p in programs]
        call = [np.zeros((n, 2), np.int64) for n in n_ops]
        gpu_t = [np.full((n, 2), -1, np.int64) for n in n_ops]
        corr_of = [np.zeros(n, np.int64) for n in n_ops]
        for r in range(R):  # host issue times: the host runs ahead until the step's final sync
            h = int(host[r])
            for i, op in enumerate(programs[r]):
                if op.kind == "sync":
                    continue
                h += int(6_000 * rng.uniform(0.7, 1.4))
                a = int(5_000 * rng.uniform(0.8, 1.25))
                call[r][i] = (h, h + a)
                h += a
                corr_of[r][i] = corr[r]
                corr[r] += 1
            host[r] = h
        noise = [np.clip(rng.normal(1.0, 0.015, n), 0.95, 1.05) for n in n_ops]
        # GPU: event loop over the ranks' two streams; collectives wait for all participants
        head = [[0, 0] for _ in range(R)]
        order = [
            [[i for i, op in enumerate(programs[r]) if op.kind != "sync" and op.stream == s] for s in (0, 1)]
            for r in range(R)
        ]
        arrivals: dict[tuple, dict[int, tuple[int, int]]] = {}
        done = 0
        total = sum(len(o[0]) + len(o[1]) for o in order)
        while done < total:
            progress = False
            for r in range(R):
                for s in (0, 1):
                    while head[r][s] < len(order[r][s]):
                        i = order[r][s][head[r][s]]
                        op = programs[r][i]
                        deps = [x for x in (op.dep, *op.deps) if x >= 0]
                        if any(gpu_t[r][x][1] < 0 for x in deps):
                            break
                        ready = int(call[r][i][0]) + int(rng.integers(2_500, 6_000))
                        start = max(ready, int(free[r][s]), *(int(gpu_t[r][x][1]) for x in deps))
                        if op.kind == "kernel":
                            end = start + max(1, int(round(op.dur * noise[r][i])))
                            gpu_t[r][i] = (start, end)
                            free[r][s] = end
                            head[r][s] += 1
                            done += 1
                            progress = True
                            continue
                        key = op.key
                        got = arrivals.setdefault(key, {})
                        if r not in got:
                            got[r] = (start, i)
                            progress = True
                        need = len(groups[op.group].members) if op.name not in ("Send", "Recv") else 2
                        if len(got) < need:
                            break
                        last = max(a for a, _ in got.values())
                        end = last + int(round(op.dur * float(rng.uniform(0.97, 1.03))))
                        for pr, (a, pi) in got.items():
                            pe = end + int(rng.integers(0, 1_500))
                            gpu_t[pr][pi] = (a, pe)
                            free[pr][programs[pr][pi].stream] = pe
                            head[pr][programs[pr][pi].stream] += 1
                            done += 1
                        api_id[0] += 1
                        for pr, (_, pi) in got.items():
                            programs[pr][pi].api_id = api_id[0]
                        del arrivals[key]
                        progress = True
                        break
            if not progress:
                raise AssertionError("the 3D-parallel schedule deadlocked (generator bug)")
        # step end: synchronise, then the step range closes
        for r in range(R):
            drain = int(max(free[r]))
            s_call = int(host[r]) + 4_000
            e_call = max(s_call + 3_000, drain + int(rng.integers(4_000, 15_000)))
            api[r].append((s_call, e_call, W.API_STREAM_SYNC, int(corr[r]), W.MAIN_TID, True))
            corr[r] += 1
            host[r] = e_call + int(rng.integers(8_000, 20_000))
            nvtx[r].append(
                (int(push[r]), int(host[r]), text(f"ProfilerStep#{step}"), W.MAIN_TID, 59, 0, None)
            )
            for i, op in enumerate(programs[r]):
                if op.kind == "sync":
                    continue
                cs, ce = (int(x) for x in call[r][i])
                gs, ge = (int(x) for x in gpu_t[r][i])
                c = int(corr_of[r][i])
                copy = kinds[op.ktype].memcpy is not None
                api[r].append((cs, ce, W.API_MEMCPY if copy else W.API_LAUNCH, c, W.MAIN_TID, False))
                gpu[r].append((gs, ge, op.ktype, op.stream, c))
                if op.kind == "coll":
                    g = groups[op.group]
                    if not copy:
                        coll_kernels[r].append((gs, ge, g.dim))
                    nvtx[r].extend(_nccl_ranges(op, g, g.members.index(r), cs, ce, advanced, text, copy))
                    inst = operations.setdefault(
                        op.api_id,
                        {"api_id": op.api_id, "op": op.name, "comm": str(g.comm_text(advanced)),
                         "copy_engine": copy, "bytes": op.nbytes, "members": []},
                    )  # fmt: skip
                    inst["members"].append([r, c])

    ranks = []
    dom_t = min(int(min(x[0] for x in nvtx[r])) for r in range(R)) - 5_000_000
    for r in range(R):
        node = cfg.node_of(r)
        off = int(session[node])
        nvtx[r].append((dom_t, -1, text("NCCL"), W.MAIN_TID, 75, 1, None))
        ranks.append(_events(r, node, off, gpu[r], api[r], nvtx[r]))
        # truth: per dimension, kernel time and the part no compute/memory/other kernel covers
        busy = [(s, e) for s, e, kt, _, _ in gpu[r] if kinds[kt].category != "comms"]
        for dim in {d for _, _, d in coll_kernels[r]}:
            mine = [(s, e) for s, e, d in coll_kernels[r] if d == dim]
            dims[dim]["total_ns"] += sum(e - s for s, e in mine)
            dims[dim]["exposed_ns"] += uncovered(mine, busy)
    flops = sum(kinds[op.ktype].flops for op in programs[0] if op.kind == "kernel")
    kernels = sum(1 for op in programs[0] if op.kind != "sync")
    job = Job(
        cfg,
        cat,
        session,
        utc,
        np.zeros(nodes, np.int64),
        ranks,
        texts,
        {cfg.first_step + i: i for i in range(cfg.steps)},
        [],
        {cfg.first_step + i: kernels for i in range(cfg.steps)},
        {cfg.first_step + i: flops for i in range(cfg.steps)},
    )
    truth = {
        "definition": "per dimension, summed over ranks: total_ns = sum of the dimension's NCCL kernel "
        "durations; exposed_ns = length of the union of those kernels not covered by any compute, "
        "memory or other GPU operation of the same rank (whole capture)",
        "by_dimension": {k: v for k, v in dims.items() if v["total_ns"]},
        "layout": "rank = t + tp*(d + dp*p) (tensor index t, data-parallel replica d, pipeline stage p)",
        "parallel": {"tp": par.tp, "pp": par.pp, "dp": par.dp},
        "nccl_trace": "advanced" if advanced else "legacy",
        "ce_collectives": ce_colls,
        "operations_definition": "every NCCL operation instance (collective, send or recv): NCCL's apiId "
        "(written only in the advanced form), operation, communicator as written, copy_engine (its "
        "transfer is a memcpy, no kernel), bytes (the payload's message size) and its members [rank, "
        "correlation id of the kernel or memcpy]",
        "operations": [operations[k] for k in sorted(operations)],
        "communicators": [
            {
                "dimension": g.dim,
                "ranks": list(g.members),
                "comm": str(g.comm_text(advanced)),
                "link": "nvlink" if g.busbw == NVLINK_BUSBW else "network",
            }
            for g in groups
        ],
    }
    truth.update(_instances.truth(ranks, session, kinds, truth))  # per instance, CE collectives too
    return job, truth


def _nccl_ranges(
    op: Op, g: Group, comm_rank: int, cs: int, ce: int, advanced: bool, text, copy: bool = False
) -> list[tuple]:
    """NCCL's NVTX range(s) around one launch call, with the JSON payload of the chosen trace form.

    Advanced form (documents only, see the module docstring): `API Group` > the API range (before the
    launch) and `GroupLaunch` > `KernelLaunch` (or `CE Sync`, then `CE Batch` for a copy-engine
    collective) around the launch call; only the API range carries the apiId."""
    n = len(g.members)
    if not advanced:
        payload: dict = {"NCCL communicator ID": g.comm_id, "Message size [bytes]": op.nbytes}
        if op.name in ("Send", "Recv"):
            payload["Peer rank"] = op.peer
        else:
            payload["Reduction operation"] = "ncclSum"
        payload["Data type"] = "ncclBfloat16"
        name = f"nccl{op.name}"
        return [(cs - 1_200, ce + 700, text(name), W.MAIN_TID, 59, 1, json.dumps(payload))]
    gid = op.api_id  # one operation per group: the group's id may be its operation's
    payload = {"apiId": op.api_id, "apiGroupId": gid, "commHash": g.comm_text(True), "rank": comm_rank}
    payload["nRanks"] = n
    if op.name in ("Send", "Recv"):
        payload["peer"] = op.peer
    payload.update(
        {"seqNumber": op.seq, "count": op.nbytes // 2, "datatype": "ncclBfloat16", "msgSize": op.nbytes}
    )
    group = json.dumps({"apiGroupId": gid, "group": gid})
    launch = json.dumps({"apiGroupId": gid})
    ranges = [
        (cs - 4_000, ce + 1_500, text("API Group"), W.MAIN_TID, 59, 1, group),
        (cs - 3_600, cs - 2_000, text(op.name), W.MAIN_TID, 59, 1, json.dumps(payload)),
        (cs - 1_800, ce + 1_000, text("GroupLaunch"), W.MAIN_TID, 59, 1, launch),
    ]
    if copy:
        ranges.append((cs - 1_500, cs - 700, text("CE Sync"), W.MAIN_TID, 59, 1, launch))
        ranges.append((cs - 600, ce + 300, text("CE Batch"), W.MAIN_TID, 59, 1, launch))
    else:
        ranges.append((cs - 600, ce + 300, text("KernelLaunch"), W.MAIN_TID, 59, 1, launch))
    return ranges


def _events(rank: int, node: int, off: int, gpu: list, api: list, nvtx: list) -> RankEvents:
    g = sorted(gpu, key=lambda x: (x[0], x[4]))
    a = sorted(api, key=lambda x: x[0])
    n = sorted(nvtx, key=lambda x: x[0])

    def col(rows: list, j: int, dtype=np.int64) -> np.ndarray:
        return np.array([x[j] for x in rows], dtype=dtype)

    ev = RankEvents(
        rank=rank,
        node=node,
        gpu_start=col(g, 0) - off,
        gpu_end=col(g, 1) - off,
        gpu_ktype=col(g, 2),
        gpu_stream=col(g, 3),
        gpu_corr=col(g, 4),
        gpu_graph_node=np.full(len(g), -1, np.int64),
        api_start=col(a, 0) - off,
        api_end=col(a, 1) - off,
        api_name=col(a, 2),
        api_corr=col(a, 3),
        api_tid=col(a, 4),
        api_sync=col(a, 5, bool),
        nvtx_start=col(n, 0) - off,
        nvtx_end=np.where(col(n, 1) < 0, -1, col(n, 1) - off),
        nvtx_text=col(n, 2),
        nvtx_tid=col(n, 3),
        nvtx_type=col(n, 4),
        nvtx_domain=col(n, 5),
    )
    ev.nvtx_payload = np.array([x[6] for x in n], dtype=object)
    return ev
