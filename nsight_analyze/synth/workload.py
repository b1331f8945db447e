"""The host programs of a data-parallel training step and their simulation on every rank at once.

A step is a *program*: the sequence of host items (CUDA API calls, data-loader work, blocking
syncs) in the order the Python process issues them (the programs themselves, transformer step,
GEMM-only step and prologue, are built in synth/programs.py). Simulation is vectorised over ranks and,
between blocking calls, over items: a stream is a FIFO, so op ends follow
`end_i = D_i + max(free, max_j<=i(ready_j - D_{j-1}))` (D = cumulative durations), computed with
`np.maximum.accumulate`. Collectives couple the ranks: an all-reduce's transfer starts when the
last rank arrives and then ends at (nearly) the same true time everywhere.

All times here are *true* times (ns); the writer shifts each node onto its own clock.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from . import causes as C
from . import kernels as K
from .injections import Injections

LAUNCH, GRAPH_NODE, HOST_RANGE, SYNC, API_ONLY = range(5)
COMPUTE_STREAM, NCCL_STREAM = 0, 1
STREAM_IDS = (7, 20)
MAIN_TID, AUTOGRAD_TID = 0, 1

API_NAMES = [
    "cudaLaunchKernel_v7000",
    "cudaMemcpyAsync_v3020",
    "cudaStreamSynchronize_v3020",
    "cudaDeviceSynchronize_v3020",
    "cudaGraphLaunch_v10000",
]
API_LAUNCH, API_MEMCPY, API_STREAM_SYNC, API_DEVICE_SYNC, API_GRAPH = range(5)

DATALOADER_TEXT = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
OPTIMIZER_TEXT = "Optimizer.step#AdamW.step"
NCCL_TEXT = "ncclAllReduce"


@dataclass
class Item:
    """One host action: base GPU duration, API duration and the host gap before it (ns), the item
    whose GPU end it must wait for (`dep`), and the item whose API call launched it (graphs)."""

    kind: int
    ktype: int = -1
    stream: int = COMPUTE_STREAM
    api: int = -1
    dur: float = 0.0
    api_dur: float = 5_000.0
    pre_gap: float = 6_000.0
    dep: int = -1
    launch_item: int = -1
    tid: int = MAIN_TID
    nccl: bool = False
    sync: str = ""
    pageable: bool = False
    extra: bool = False  # uneven-work slot: runs only on ranks given more work (synth/causes.py)


@dataclass
class Program:
    """One step's (or the prologue's) items as arrays; built once per distinct step shape."""

    items: list[Item]
    opt_range: tuple[int, int] | None = None
    dataloader_item: int = -1

    def __post_init__(self) -> None:
        it = self.items
        for i, x in enumerate(it):
            if x.launch_item < 0:
                x.launch_item = i
        self.n = len(it)
        self.kind = np.array([x.kind for x in it], dtype=np.int8)
        self.ktype = np.array([x.ktype for x in it], dtype=np.int32)
        self.stream = np.array([x.stream for x in it], dtype=np.int8)
        self.api = np.array([x.api for x in it], dtype=np.int16)
        self.dur = np.array([x.dur for x in it], dtype=np.float64)
        self.api_dur = np.array([x.api_dur if x.kind != GRAPH_NODE else 0.0 for x in it])
        self.pre_gap = np.array([x.pre_gap if x.kind != GRAPH_NODE else 0.0 for x in it])
        self.dep = np.array([x.dep for x in it], dtype=np.int64)
        self.launch_item = np.array([x.launch_item for x in it], dtype=np.int64)
        self.tid = np.array([x.tid for x in it], dtype=np.int8)
        self.is_nccl = np.array([x.nccl for x in it], dtype=bool)
        self.extra = np.array([x.extra for x in it], dtype=bool)
        self.has_api = np.isin(self.kind, (LAUNCH, SYNC, API_ONLY))
        self.has_gpu = (
            (self.kind == LAUNCH)
            | (self.kind == GRAPH_NODE)
            | np.array([x.kind == SYNC and x.sync == "memcpy" for x in it])
        )
        self.is_sync_api = np.array([x.kind == SYNC for x in it])
        # corr offset of each API item within the program (graph nodes share their launcher's)
        api_rank = np.cumsum(self.has_api) - 1
        self.corr_offset = np.where(self.has_api, api_rank, api_rank[self.launch_item])
        self.n_api = int(self.has_api.sum())
        self.syncs = [i for i, x in enumerate(it) if x.kind == SYNC]
        self.sync_kind = {i: it[i].sync for i in self.syncs}


@dataclass
class Config:
    """The job: size, seed, workload shape (bf16 transformer, batch 1) and injections."""

    ranks: int = 8
    gpus_per_node: int = 4
    steps: int = 20
    seed: int = 1
    workload: str = "transformer"
    kernels_per_step: int | None = None
    injections: Injections = field(default_factory=Injections)
    hidden: int = 2048
    seq: int = 4096
    heads: int = 16
    vocab: int = 32_000
    first_step: int = 1
    # per-rank work of every GPU operation but the collectives, against the job as built (a strong-
    # scaling series shares the global work among more ranks: synth/scaling.py); 1.0: unchanged
    work_scale: float = 1.0

    @property
    def nodes(self) -> int:
        return (self.ranks + self.gpus_per_node - 1) // self.gpus_per_node

    def node_of(self, rank: int) -> int:
        return rank // self.gpus_per_node


class Catalog:
    """Kernel kinds used by a job, interned so items refer to them by index.

    `copy_scale`: the job's work_scale, applied to the bytes of its host-to-device copies (the
    input batch, the only HtoD copy the job issues: per sample, so B / 32 of it in a batch-size
    sweep, N1 / N per GPU in a strong-scaling series). The simulator scales the copy's duration
    by the same factor, so its apparent bandwidth stays the link's; 1.0: the bytes as built."""

    def __init__(self, copy_scale: float = 1.0) -> None:
        self.kinds: list[K.KType] = []
        self._index: dict[tuple, int] = {}
        self.copy_scale = copy_scale

    def add(self, k: K.KType) -> int:
        if k.memcpy == "HtoD" and self.copy_scale != 1.0:
            nbytes = max(1, int(round(k.nbytes * self.copy_scale)))
            k = dataclasses.replace(k, nbytes=nbytes, shape={**k.shape, "bytes": nbytes})
        key = (k.name, k.nbytes, k.flops, k.grid, k.block, k.memcpy, k.src_kind, k.dst_kind)
        if key not in self._index:
            self._index[key] = len(self.kinds)
            self.kinds.append(k)
        return self._index[key]


@dataclass
class StepResult:
    """Per item (R, n) times of one executed program, plus its NVTX ranges and collectives."""

    program: Program
    step: int | None
    call_start: np.ndarray
    call_end: np.ndarray
    gpu_start: np.ndarray
    gpu_end: np.ndarray
    corr_base: int
    nvtx: list[tuple[np.ndarray, np.ndarray, str, int]]  # (start (R,), end (R,), text, tid); domain by text
    collectives: list[dict]
    present: np.ndarray | None = None  # (R, n) bool: False = an uneven-work slot this rank skips


def _fifo(ready: np.ndarray, dur: np.ndarray, free: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start/end of ops queued in order on one stream per rank (ready, dur: (R, n); free: (R,))."""
    d = np.cumsum(dur, axis=1)
    m = np.maximum.accumulate(ready - (d - dur), axis=1)
    end = d + np.maximum(m, free[:, None])
    return end - dur, end


class Simulator:
    """Runs programs on all ranks, keeping each rank's host clock and stream queues."""

    def __init__(self, cfg: Config, rng: np.random.Generator, host_start: np.ndarray):
        self.cfg, self.rng = cfg, rng
        self.R = cfg.ranks
        self.host = host_start.astype(np.int64).copy()
        self.free = [host_start.astype(np.int64).copy(), host_start.astype(np.int64).copy()]
        self.corr = 1
        self.slow = np.ones(self.R)
        for r, pct in cfg.injections.straggler.items():
            if 0 <= r < self.R:
                self.slow[r] = 1 + pct / 100.0
        self.causes = C.RankCauses(cfg)

    def run(self, p: Program, step: int | None, extra_input_ns: int = 0) -> StepResult:
        R, n, rng = self.R, p.n, self.rng
        noise = np.clip(rng.normal(1.0, 0.015, (R, n)), 0.95, 1.05)
        api_j = rng.uniform(0.8, 1.25, (R, n))
        gap_j = rng.uniform(0.7, 1.4, (R, n))
        lat = rng.integers(2_500, 6_000, (R, n))
        wake = rng.integers(4_000, 15_000, (R, len(p.syncs) + 1))
        jitter = rng.integers(0, 1_500, (R, max(1, int(p.is_nccl.sum()))))
        if self.cfg.injections.sync_free:  # re-simulation without sync stalls: no wake-up after the drain
            wake[:] = 0
        compute = self._compute_mask(p)
        dur = p.dur[None, :] * noise * np.where(compute[None, :], self.slow[:, None], 1.0)
        if self.cfg.work_scale != 1.0:  # a strong-scaling run's smaller share of the work
            dur = dur * np.where(p.is_nccl, 1.0, self.cfg.work_scale)[None, :]
        dur = np.maximum(np.rint(dur * self.causes.gpu_factor(p)), 1).astype(np.int64)
        api_dur = np.rint(p.api_dur[None, :] * api_j).astype(np.int64)
        if p.dataloader_item >= 0:
            api_dur[:, p.dataloader_item] += extra_input_ns
        pre_gap = np.rint(p.pre_gap[None, :] * gap_j).astype(np.int64)
        present = self.causes.apply(p, step, dur, api_dur, pre_gap, lat)
        if self.cfg.injections.launch_free:  # no-launch-gaps re-simulation (same draws, then zeroed):
            launch = p.kind == LAUNCH  # the host issues every kernel at once, as a CUDA graph at best
            lat[:] = 0
            pre_gap[:, launch] = 0
            api_dur[:, launch] = 0

        cs = np.zeros((R, n), np.int64)
        ce = np.zeros((R, n), np.int64)
        gs = np.zeros((R, n), np.int64)
        ge = np.zeros((R, n), np.int64)
        collectives: list[dict] = []
        bounds = p.syncs if p.syncs and p.syncs[-1] == n - 1 else p.syncs + [n - 1]
        a = 0
        nccl_k = 0
        for si, b in enumerate(bounds):
            sl = slice(a, b + 1)
            inc = pre_gap[:, sl] + api_dur[:, sl]
            cs[:, sl] = self.host[:, None] + np.cumsum(inc, axis=1) - api_dur[:, sl]
            ce[:, sl] = cs[:, sl] + api_dur[:, sl]
            idx = np.arange(a, b + 1)
            gpu_idx = idx[p.has_gpu[idx] & ~p.is_sync_api[idx]]
            ready = cs[:, p.launch_item[gpu_idx]] + lat[:, gpu_idx]
            pos = {int(i): j for j, i in enumerate(gpu_idx)}
            comp = [int(i) for i in gpu_idx if p.stream[i] == COMPUTE_STREAM]
            nccl = [int(i) for i in gpu_idx if p.stream[i] == NCCL_STREAM]
            split = next((j for j, i in enumerate(comp) if p.dep[i] >= 0 and p.is_nccl[p.dep[i]]), len(comp))
            self._queue(comp[:split], ready, pos, dur, gs, ge)
            for i in nccl:
                arrive = np.maximum(ready[:, pos[i]], self.free[NCCL_STREAM])
                if p.dep[i] >= 0:
                    arrive = np.maximum(arrive, ge[:, p.dep[i]])
                last = int(arrive.max())
                end = last + self.causes.transfer(int(dur[:, i].max()), jitter[:, nccl_k])
                gs[:, i], ge[:, i] = arrive, end
                self.free[NCCL_STREAM] = end.copy()
                collectives.append(
                    {
                        "item": i,
                        "arrival": arrive.copy(),
                        "transfer_start": last,
                        "end": end.copy(),
                        "bytes": self.cfg_kind(p.ktype[i]).nbytes,
                    }
                )
                nccl_k += 1
            if split < len(comp):
                first = comp[split]
                ready[:, pos[first]] = np.maximum(ready[:, pos[first]], ge[:, p.dep[first]])
                self._queue(comp[split:], ready, pos, dur, gs, ge)
            if p.is_sync_api[b]:
                kind = p.sync_kind[b]
                if kind == "memcpy":
                    start = np.maximum(cs[:, b] + lat[:, b], self.free[COMPUTE_STREAM])
                    gs[:, b], ge[:, b] = start, start + dur[:, b]
                    self.free[COMPUTE_STREAM] = ge[:, b].copy()
                    drain = ge[:, b]
                elif kind == "device":
                    drain = np.maximum(self.free[COMPUTE_STREAM], self.free[NCCL_STREAM])
                else:
                    drain = self.free[COMPUTE_STREAM]
                ce[:, b] = np.maximum(cs[:, b] + api_dur[:, b], drain + wake[:, si])
                self.host = ce[:, b].copy()
            else:
                self.host = ce[:, b].copy()
            a = b + 1

        nvtx: list[tuple[np.ndarray, np.ndarray, str, int]] = []
        if p.dataloader_item >= 0:
            i = p.dataloader_item
            nvtx.append((cs[:, i], ce[:, i], DATALOADER_TEXT, int(p.tid[i])))
        for i in np.flatnonzero(p.is_nccl):
            nvtx.append((cs[:, i] - 1_200, ce[:, i] + 700, NCCL_TEXT, int(p.tid[i])))
        if p.opt_range:
            f, l_ = p.opt_range
            nvtx.append((cs[:, f] - 1_500, ce[:, l_] + 1_000, OPTIMIZER_TEXT, MAIN_TID))
        res = StepResult(p, step, cs, ce, gs, ge, self.corr, nvtx, collectives, present)
        self.corr += p.n_api
        return res

    def _queue(self, items, ready, pos, dur, gs, ge) -> None:
        if not items:
            return
        cols = [pos[i] for i in items]
        s, e = _fifo(ready[:, cols], dur[:, items], self.free[COMPUTE_STREAM])
        gs[:, items], ge[:, items] = s, e
        self.free[COMPUTE_STREAM] = e[:, -1].copy()

    # set by the job so the simulator can look kinds up
    catalog: Catalog

    def _compute_mask(self, p: Program) -> np.ndarray:
        if not hasattr(p, "compute_mask"):
            p.compute_mask = np.array(
                [k >= 0 and self.catalog.kinds[k].category == "compute" for k in p.ktype]
            )
        return p.compute_mask

    def cfg_kind(self, k: int) -> K.KType:
        return self.catalog.kinds[k]


def advance_host(sim: Simulator, lo: int, hi: int) -> np.ndarray:
    """Host time passes (Python work between steps); returns the new host times."""
    sim.host = sim.host + sim.rng.integers(lo, hi, sim.R)
    return sim.host.copy()
