"""A whole synthetic job: node clocks, the per-step simulation, and per-rank event arrays.

Clock model: true time T. Node n's session starts at true time S_n (shared by its ranks: one
clock per host), so a rank's file time is `T - S_n`. Its UTC anchor
(`TARGET_INFO_SESSION_START_TIME.utcEpochNs`) is `UTC_BASE + S_n + skew_n`, where skew_n is
the node's realtime-clock error (the `clock-skew` injection). Aligning by UTC is therefore
exact unless a node is skewed; matching collectives recovers the skew.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import workload as W
from .programs import gemm_step, prologue, transformer_step

UTC_BASE_NS = 1_793_613_600_000_000_000  # 2026-11-02T14:40:00Z: fixed, never the wall clock
HOST_START_NS = 350_000_000  # first host activity, ns after the earliest session start


@dataclass
class RankEvents:
    """One rank's events on its own file timeline (what the writer stores, what the truth reads)."""

    rank: int
    node: int
    gpu_start: np.ndarray
    gpu_end: np.ndarray
    gpu_ktype: np.ndarray
    gpu_stream: np.ndarray  # 0 compute, 1 nccl
    gpu_corr: np.ndarray
    gpu_graph_node: np.ndarray  # -1 when not launched by a graph
    api_start: np.ndarray
    api_end: np.ndarray
    api_name: np.ndarray  # index into workload.API_NAMES
    api_corr: np.ndarray
    api_tid: np.ndarray
    api_sync: np.ndarray  # bool: synchronising call (docs/metrics.md)
    nvtx_start: np.ndarray
    nvtx_end: np.ndarray  # -1: no end (domain create)
    nvtx_text: np.ndarray  # index into Job.nvtx_texts
    nvtx_tid: np.ndarray
    nvtx_type: np.ndarray  # 59 push/pop, 75 domain create
    nvtx_domain: np.ndarray  # 0 default, 1 NCCL
    nvtx_payload: np.ndarray | None = None  # JSON payload text per range (object array), or None


@dataclass
class Job:
    cfg: W.Config
    catalog: W.Catalog
    session_start: np.ndarray  # S_n per node, true ns (node 0 = 0)
    utc_start: np.ndarray  # utcEpochNs per node
    skew: np.ndarray  # per node, ns
    ranks: list[RankEvents]
    nvtx_texts: list[str]
    step_text_index: dict[int, int]
    collectives: list[dict]  # per instance: step, bucket, arrival (R,) true, transfer_start, end (R,)
    kernels_per_step: dict[int, int]
    flops_per_step: dict[int, int]


def _present(res: W.StepResult, cols: np.ndarray) -> np.ndarray:
    """(R, len(cols)) bool: the rank ran the item (False only for skipped uneven-work slots)."""
    if res.present is None:
        return np.ones((res.gpu_start.shape[0], len(cols)), bool)
    return res.present[:, cols]


def build(cfg: W.Config) -> Job:
    rng = np.random.default_rng(cfg.seed)
    nodes = cfg.nodes
    session = np.zeros(nodes, np.int64)
    if nodes > 1:
        session[1:] = np.arange(1, nodes) * 1_300_000 + rng.integers(0, 700_000, nodes - 1)
    skew = np.array(
        [int(round(cfg.injections.clock_skew_ms.get(n, 0.0) * 1e6)) for n in range(nodes)], np.int64
    )
    utc = UTC_BASE_NS + session + skew
    host0 = HOST_START_NS + int(session.max()) + rng.integers(0, 300_000, cfg.ranks)

    cat = W.Catalog(copy_scale=cfg.work_scale)  # the input copy's bytes are per sample
    sim = W.Simulator(cfg, rng, host0)
    sim.catalog = cat
    results: list[W.StepResult] = [sim.run(prologue(cat), None)]
    cache: dict[tuple[bool, bool], W.Program] = {}
    step_ranges: list[tuple[int, np.ndarray, np.ndarray]] = []
    for i in range(cfg.steps):
        step = cfg.first_step + i
        lb = (cfg.injections.is_launch_bound(step), cfg.injections.is_unfused_elementwise(step))
        if lb not in cache:
            cache[lb] = gemm_step(cfg, cat) if cfg.workload == "gemm" else transformer_step(cfg, cat, *lb)
        push = W.advance_host(sim, 20_000, 45_000)
        res = sim.run(cache[lb], step, cfg.injections.input_stall_ns(step))
        pop = W.advance_host(sim, 8_000, 20_000)
        results.append(res)
        step_ranges.append((step, push, pop))

    texts = [f"ProfilerStep#{s}" for s, _, _ in step_ranges]
    step_text_index = {s: j for j, (s, _, _) in enumerate(step_ranges)}
    texts += [W.DATALOADER_TEXT, W.NCCL_TEXT, W.OPTIMIZER_TEXT, "NCCL"]
    tix = {t: j for j, t in enumerate(texts)}

    # Concatenate all programs' items: static per item (n_total,), times (R, n_total).
    gpu_cols, api_cols, nv = [], [], []
    graph_counter = 0
    collectives = []
    kernels_per_step: dict[int, int] = {}
    flops_per_step: dict[int, int] = {}
    for res in results:
        p = res.program
        g = np.flatnonzero(p.has_gpu)
        a = np.flatnonzero(p.has_api)
        gnode = np.full(len(g), -1, np.int64)
        is_graph = p.kind[g] == W.GRAPH_NODE
        gnode[is_graph] = 1000 + graph_counter + np.arange(int(is_graph.sum()))
        graph_counter += int(is_graph.sum())
        gpu_cols.append(
            (
                res.gpu_start[:, g],
                res.gpu_end[:, g],
                p.ktype[g],
                p.stream[g],
                res.corr_base + p.corr_offset[g],
                gnode,
                _present(res, g),
            )
        )
        api_cols.append(
            (
                res.call_start[:, a],
                res.call_end[:, a],
                p.api[a],
                res.corr_base + p.corr_offset[a],
                p.tid[a],
                p.is_sync_api[a],
                _present(res, a),
            )
        )
        for s, e, text, tid in res.nvtx:
            nv.append((s, e, tix[text], tid, 59, 1 if text == W.NCCL_TEXT else 0))
        if res.step is not None:
            kinds = [cat.kinds[k] for k in p.ktype[g]]
            kernels_per_step[res.step] = sum(1 for k, x in zip(kinds, p.extra[g]) if not k.memcpy and not x)
            flops_per_step[res.step] = int(sum(k.flops for k in kinds))
            for b, c in enumerate(res.collectives):
                collectives.append({"step": res.step, "bucket": b, **c})
    for step, push, pop in step_ranges:
        nv.append((push, pop, step_text_index[step], W.MAIN_TID, 59, 0))

    R = cfg.ranks

    def cat_arr(j: int, src: list[tuple]) -> np.ndarray:
        return np.concatenate([c[j] for c in src], axis=-1)

    g_start, g_end = cat_arr(0, gpu_cols), cat_arr(1, gpu_cols)
    g_static = [cat_arr(j, gpu_cols) for j in range(2, 6)]
    g_present = cat_arr(6, gpu_cols)
    a_start, a_end = cat_arr(0, api_cols), cat_arr(1, api_cols)
    a_static = [cat_arr(j, api_cols) for j in range(2, 6)]
    a_present = cat_arr(6, api_cols)
    first_api = int(a_start.min())
    dom_t = np.full(R, first_api - 5_000_000, np.int64)  # NCCL registers its domain at init
    nv.append((dom_t, np.full(R, -1, np.int64), tix["NCCL"], W.MAIN_TID, 75, 1))
    n_start = np.stack([x[0] for x in nv], axis=1)
    n_end = np.stack([x[1] for x in nv], axis=1)
    n_static = [np.array([x[j] for x in nv]) for j in range(2, 6)]

    ranks = []
    for r in range(R):
        node = cfg.node_of(r)
        off = session[node]
        gk, ak = np.flatnonzero(g_present[r]), np.flatnonzero(a_present[r])  # uneven-work slots
        go = gk[np.lexsort((g_static[2][gk], g_start[r][gk]))]
        ao = ak[np.argsort(a_start[r][ak], kind="stable")]
        no = np.argsort(n_start[r], kind="stable")
        nend = n_end[r][no]
        ranks.append(
            RankEvents(
                rank=r,
                node=node,
                gpu_start=g_start[r][go] - off,
                gpu_end=g_end[r][go] - off,
                gpu_ktype=g_static[0][go],
                gpu_stream=g_static[1][go],
                gpu_corr=g_static[2][go],
                gpu_graph_node=g_static[3][go],
                api_start=a_start[r][ao] - off,
                api_end=a_end[r][ao] - off,
                api_name=a_static[0][ao],
                api_corr=a_static[1][ao],
                api_tid=a_static[2][ao],
                api_sync=a_static[3][ao].astype(bool),
                nvtx_start=n_start[r][no] - off,
                nvtx_end=np.where(nend < 0, -1, nend - off),
                nvtx_text=n_static[0][no],
                nvtx_tid=n_static[1][no],
                nvtx_type=n_static[2][no],
                nvtx_domain=n_static[3][no],
            )
        )
    return Job(
        cfg,
        cat,
        session,
        utc,
        skew,
        ranks,
        texts,
        step_text_index,
        collectives,
        kernels_per_step,
        flops_per_step,
    )
