"""The step programs the data-parallel job runs: the transformer step, the GEMM-only step, the prologue.

Why: workload.py defines what a program is (Item, Program) and simulates programs on every rank;
which items a training step issues, in which order and with which kernel kinds, is the workload's
shape and changes on its own (model depth, the backward pass's gradient buckets, the injections
that add or replace items: launch-bound fills, sync stalls, CUDA graphs, uneven work, kernel-level
faults from synth/kernel_faults.py). Durations here are base GPU durations (roofline of the kind);
the simulator applies noise and the per-rank causes.
"""

from __future__ import annotations

import dataclasses

from . import causes as C
from . import kernels as K
from .kernel_faults import Faults
from .workload import (
    API_DEVICE_SYNC,
    API_GRAPH,
    API_LAUNCH,
    API_MEMCPY,
    API_ONLY,
    API_STREAM_SYNC,
    AUTOGRAD_TID,
    GRAPH_NODE,
    HOST_RANGE,
    LAUNCH,
    NCCL_STREAM,
    SYNC,
    Catalog,
    Config,
    Item,
    Program,
)


def layers_for(cfg: Config) -> int:
    """Transformer depth giving about `kernels_per_step` kernels (27 per layer + ~20 fixed)."""
    if cfg.workload == "gemm":
        return 0
    if cfg.kernels_per_step is None:
        return 4
    return max(1, round((cfg.kernels_per_step - 20) / 28))


def _k(cat: Catalog, kt: K.KType, **kw) -> Item:
    if kt.memcpy:
        dur = kt.nbytes / (20e9 if kt.memcpy == "HtoD" else 8e9) * 1e9 + 1_500
        return Item(LAUNCH, cat.add(kt), api=API_MEMCPY, dur=dur, api_dur=7_000.0, **kw)
    if kt.category == "compute":
        eff = 0.55 if "flash" in kt.name else 0.72
        dur = K.gemm_ns(kt, eff)
    else:
        dur = K.bytes_ns(kt.nbytes)
    return Item(LAUNCH, cat.add(kt), api=API_LAUNCH, dur=dur, **kw)


def transformer_step(cfg: Config, cat: Catalog, launch_bound: bool, unfused: bool = False) -> Program:
    faults = Faults(cfg, cat, unfused, _k)
    h, s, v, heads = cfg.hidden, cfg.seq, cfg.vocab, cfg.heads
    t = s  # tokens per micro-batch (batch 1)
    inj = cfg.injections
    L = layers_for(cfg)
    act = t * h * 2
    items: list[Item] = []

    def add(item: Item) -> int:
        items.append(item)
        return len(items) - 1

    dl = add(Item(HOST_RANGE, api_dur=400_000.0, pre_gap=3_000.0))
    add(_k(cat, K.memcpy("HtoD", 2 * 1024 * 1024, 1, 2)))  # pinned -> device
    if launch_bound:
        fill = K.mem(K.FILL, 4096, grid=(1, 1, 1))
        for _ in range(3000):
            it = _k(cat, fill, pre_gap=4_000.0, api_dur=4_500.0)
            it.dur = 1_800.0
            add(it)
    add(_k(cat, K.mem(K.INDEX_SELECT, act * 2)))
    add(_k(cat, K.mem(K.DISPATCH, act * 2, grid=(264, 1, 1), category="other")))
    attn_flops = 4 * t * t * h
    fwd_layer = [
        K.mem(K.LAYER_NORM, act * 2),
        K.gemm_kind(K.SM90_GEMM, t, 3 * h, h),
        K.compute(
            K.FLASH_FWD,
            attn_flops,
            {
                "batch": 1,
                "heads": heads,
                "seq": s,
                "head_dim": h // heads,
                "formula": "4*batch*heads*seq^2*head_dim",
            },
        ),
        K.gemm_kind(K.NVJET_TN, t, h, h),
        K.mem(K.ADD, act * 3),
        K.mem(K.LAYER_NORM, act * 2),
        K.gemm_kind(K.SM90_GEMM_NN, t, 4 * h, h),
        K.mem(K.GELU, act * 8),
        K.gemm_kind(K.NVJET_NT, t, h, 4 * h),
        K.mem(K.ADD, act * 3),
    ]
    graph_launch = -1
    for layer in range(L):
        if inj.sync_stall and layer == L // 2:
            add(Item(SYNC, api=API_DEVICE_SYNC, sync="device", api_dur=3_000.0))
        if inj.cuda_graph and graph_launch < 0:
            graph_launch = add(Item(API_ONLY, api=API_GRAPH, api_dur=9_000.0))
        for it in faults.expand(fwd_layer):
            if inj.cuda_graph:
                it.kind, it.api, it.launch_item = GRAPH_NODE, -1, graph_launch
            add(it)
        if inj.cuda_graph and inj.sync_stall and layer + 1 == L // 2:
            graph_launch = -1  # the sync splits the region: relaunch a second graph after it
    for kt in C.extra_kinds(inj, fwd_layer, L):  # uneven-work: more kernels of the same kinds
        add(dataclasses.replace(_k(cat, kt), extra=True))
    add(_k(cat, K.gemm_kind(K.SM90_GEMM, t, v, h)))
    add(_k(cat, K.mem(K.SOFTMAX, t * v * 4)))
    add(_k(cat, K.mem(K.NLL, t * 8, grid=(1, 1, 1))))
    if inj.sync_stall:  # loss.item(): a pageable device-to-host copy that blocks the host
        add(
            Item(
                SYNC,
                ktype=cat.add(K.memcpy("DtoH", 4, 2, 0)),
                api=API_MEMCPY,
                sync="memcpy",
                dur=1_600.0,
                api_dur=6_000.0,
                pageable=True,
            )
        )
    bw = dict(tid=AUTOGRAD_TID, pre_gap=8_000.0)
    add(_k(cat, K.mem(K.SOFTMAX_BWD, t * v * 6), **bw))
    add(_k(cat, K.gemm_kind(K.NVJET_TN, t, h, v), **bw))
    add(_k(cat, K.gemm_kind(K.CUTLASS_WGRAD, v, h, t), **bw))
    layer_bytes = 12 * h * h * 2
    buckets: list[tuple[int, int]] = []  # (dep item, bytes)
    for _layer in reversed(range(L)):
        seq = [
            K.gemm_kind(K.NVJET_NT, t, 4 * h, h),
            K.gemm_kind(K.CUTLASS_WGRAD, 4 * h, h, t),
            K.mem(K.GELU_BWD, act * 12),
            K.gemm_kind(K.NVJET_TN, t, h, 4 * h),
            K.gemm_kind(K.CUTLASS_WGRAD, h, 4 * h, t),
            K.mem(K.LAYER_NORM_BWD, act * 3),
            K.mem(K.GAMMA_BETA_BWD, act * 2),
            K.gemm_kind(K.NVJET_NT, t, h, h),
            K.gemm_kind(K.CUTLASS_WGRAD, h, h, t),
            K.mem(K.FLASH_BWD_DOT, act * 2, category="compute"),
            K.compute(
                K.FLASH_BWD,
                int(attn_flops * 2.5),
                {
                    "batch": 1,
                    "heads": heads,
                    "seq": s,
                    "head_dim": h // heads,
                    "formula": "10*batch*heads*seq^2*head_dim",
                },
            ),
            K.mem(K.FLASH_BWD_CONVERT, act * 4, category="compute"),
            K.gemm_kind(K.NVJET_NT, t, h, 3 * h),
            K.gemm_kind(K.CUTLASS_WGRAD, h, 3 * h, t),
            K.mem(K.LAYER_NORM_BWD, act * 3),
            K.mem(K.GAMMA_BETA_BWD, act * 2),
            K.mem(K.ADD, act * 3),
        ]
        last = -1
        for it in faults.expand(seq, **bw):
            last = add(it)
        buckets.append((last, layer_bytes))
    emb = add(_k(cat, K.mem(K.EMBED_BWD, act * 4), **bw))
    buckets.append((emb, v * h * 2))
    n_nodes = cfg.nodes
    busbw = 200e9 if n_nodes == 1 else 150e9
    nccl_items = []
    for dep, nbytes in buckets:
        kt = cat.add(K.nccl_allreduce(nbytes))
        xfer = 2 * (cfg.ranks - 1) / max(cfg.ranks, 1) * nbytes / busbw * 1e9 + 8_000
        it = Item(
            LAUNCH,
            kt,
            stream=NCCL_STREAM,
            api=API_LAUNCH,
            dur=xfer,
            dep=dep,
            nccl=True,
            api_dur=6_000.0,
            pre_gap=9_000.0,
            tid=AUTOGRAD_TID,
        )
        nccl_items.append(it)
        if not inj.exposed_comm:
            add(it)
    if inj.exposed_comm:
        for it in nccl_items:
            it.dep = emb
            add(it)
    last_nccl = len(items) - 1 if inj.exposed_comm else max(i for i, x in enumerate(items) if x.nccl)
    opt_first = add(_k(cat, K.mem(K.LPNORM, 12 * h * h * L * 2 // 4), dep=last_nccl))
    add(_k(cat, K.mem(K.LPNORM_CLEANUP, 4096, grid=(1, 1, 1))))
    n_adam = max(2, L // 2)
    params = 12 * h * h * L + 2 * v * h
    for _ in range(n_adam):
        opt_last = add(_k(cat, K.mem(K.ADAM, params * 16 // n_adam, grid=(640, 1, 1), block=(512, 1, 1))))
    add(Item(SYNC, api=API_STREAM_SYNC, sync="stream", api_dur=3_000.0))
    return Program(items, opt_range=(opt_first, opt_last), dataloader_item=dl)


GEMM_SHAPES = [(8192, 8192, 8192), (4096, 16384, 4096), (16384, 4096, 4096), (8192, 4096, 16384)]


def gemm_step(cfg: Config, cat: Catalog) -> Program:
    n = cfg.kernels_per_step or 8
    items = [_k(cat, K.gemm_kind(K.SM90_GEMM, *GEMM_SHAPES[i % len(GEMM_SHAPES)])) for i in range(n)]
    items.append(Item(SYNC, api=API_STREAM_SYNC, sync="stream", api_dur=3_000.0))
    return Program(items)


def prologue(cat: Catalog) -> Program:
    """Model initialisation before the first profiled step: belongs to no step window."""
    items = [_k(cat, K.mem(K.FILL, 64 * 1024 * 1024)) for _ in range(4)]
    items.append(Item(SYNC, api=API_DEVICE_SYNC, sync="device", api_dur=3_000.0))
    return Program(items)
