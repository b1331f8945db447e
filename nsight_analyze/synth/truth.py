"""Ground truth: docs/metrics.md implemented a second time, over the generator's own events.

Independent of the SQL views on purpose (tests compare the two). Vectorised with numpy: all op
boundaries and window edges of a rank cut its timeline into elementary segments; each segment
is compute / memory / other / comms-exposed / idle by the precedence of the definitions; window
sums are prefix-sum differences; idle gaps are runs of idle segments, each classified once.
"""

from __future__ import annotations

import re

import numpy as np

from ..partition import IDLE_PARTS
from . import workload as W
from .job import Job, RankEvents

STEP_PATTERN = re.compile(r"(?i)^(ProfilerStep#\d+|train_step|step|iteration)\b")
INPUT_PATTERN = re.compile(r"(?i)(dataloader|data_load|next_data|get_batch|input_pipeline)")
SYNC_NAMES = {
    "cudaDeviceSynchronize",
    "cudaStreamSynchronize",
    "cudaEventSynchronize",
    "cuCtxSynchronize",
    "cuStreamSynchronize",
    "cuEventSynchronize",
    "cudaMemcpy",
    "cudaMemcpy2D",
    "cudaMemcpy3D",
    "cudaMemcpyToSymbol",
    "cudaMemcpyFromSymbol",
    "cudaMemset",
    "cuMemcpyDtoH",
    "cuMemcpyHtoD",
    # HIP twins (ROCm traces)
    "hipDeviceSynchronize",
    "hipStreamSynchronize",
    "hipEventSynchronize",
    "hipCtxSynchronize",
    "hipMemcpy",
    "hipMemcpy2D",
    "hipMemcpy3D",
    "hipMemcpyToSymbol",
    "hipMemcpyFromSymbol",
    "hipMemset",
    "hipMemcpyDtoH",
    "hipMemcpyHtoD",
    "hipMemcpyWithStream",
}
# An operation that found the GPU idle and started more than this long after its launch call ended
# waited on a dependency or a sync, not on the launch (settings.dependency_wait_us, default 100).
DEPENDENCY_WAIT_NS = 100_000
CATS = ("compute", "memory", "comms", "other")
PAGEABLE = 0  # ENUM_CUDA_MEM_KIND


def _strip_abi(name: str) -> str:
    return re.sub(r"_v\d+$", "", name)


def _step_windows(ev: RankEvents, texts: list[str]) -> list[tuple[int, int, int]]:
    """(step, start, end) per non-empty step window, per docs/metrics.md 'Windows'."""
    is_range = (ev.nvtx_end >= 0) & np.isin(ev.nvtx_type, (59, 60))
    steps = []
    for j in np.flatnonzero(is_range):
        text = texts[ev.nvtx_text[j]]
        if STEP_PATTERN.search(text):
            steps.append((ev.nvtx_start[j], ev.nvtx_end[j], text))
    if not steps or len(ev.gpu_start) == 0:
        return []
    steps.sort()
    numbers = []
    for ordinal, (_, _, text) in enumerate(steps):
        m = re.search(r"(\d+)$", text)
        numbers.append(int(m.group(1)) if m else ordinal)
    s_start = np.array([s[0] for s in steps], np.int64)
    s_end = np.array([s[1] for s in steps], np.int64)
    if np.any(s_start[1:] < s_end[:-1]):
        raise AssertionError("synthetic step ranges overlap; the truth assumes disjoint ranges")
    # launch call of each op: correlation id -> API start
    order = np.argsort(ev.api_corr, kind="stable")
    corr_sorted = ev.api_corr[order]
    pos = np.clip(np.searchsorted(corr_sorted, ev.gpu_corr), 0, len(corr_sorted) - 1)
    found = corr_sorted[pos] == ev.gpu_corr
    launch = np.where(found, ev.api_start[order][pos], np.iinfo(np.int64).min)
    k = np.searchsorted(s_start, launch, side="right") - 1
    inside = found & (k >= 0) & (launch < s_end[np.clip(k, 0, None)])
    out = []
    prev_end: int | None = None
    by_number = sorted(set(numbers))
    num_arr = np.array(numbers)
    for n in by_number:
        ranges = np.flatnonzero(num_arr == n)
        sel = inside & np.isin(k, ranges)
        if not sel.any():
            continue
        e = int(ev.gpu_end[sel].max())
        f = int(ev.gpu_start[sel].min())
        e_run = e if prev_end is None else max(e, prev_end)
        start = f if prev_end is None else prev_end
        if e_run > start:
            out.append((n, start, e_run))
        prev_end = e_run
    return out


def _sync_calls(ev: RankEvents, job: Job) -> tuple[np.ndarray, np.ndarray]:
    names = [_strip_abi(W.API_NAMES[i]) for i in range(len(W.API_NAMES))]
    is_sync_name = np.array([n in SYNC_NAMES for n in names])[ev.api_name]
    async_copy = np.array([bool(re.fullmatch(r"(cuda|hip)Memcpy.*Async", n)) for n in names])[ev.api_name]
    kinds = job.catalog.kinds
    pageable_kt = np.array([k.memcpy is not None and PAGEABLE in (k.src_kind, k.dst_kind) for k in kinds])
    pageable_corr = ev.gpu_corr[pageable_kt[ev.gpu_ktype]]
    touched = np.isin(ev.api_corr, pageable_corr)
    sync = is_sync_name | (async_copy & touched)
    return ev.api_start[sync], ev.api_end[sync]


def rank_partition(job: Job, ev: RankEvents) -> list[dict]:
    """Rows for the whole capture (step None) and every step window of one rank."""
    kinds = job.catalog.kinds
    cat_of_kind = np.array([CATS.index(k.category) for k in kinds], np.int8)
    op_cat = cat_of_kind[ev.gpu_ktype]
    if len(ev.gpu_start) == 0:
        return []
    whole = (int(ev.gpu_start.min()), int(ev.gpu_end.max()))
    steps = _step_windows(ev, job.nvtx_texts)
    bounds = np.unique(
        np.concatenate(
            [
                ev.gpu_start,
                ev.gpu_end,
                np.array(whole),
                np.array([s for _, s, _ in steps] + [e for _, _, e in steps], np.int64),
            ]
        )
    )
    nseg = len(bounds) - 1
    seglen = np.diff(bounds)
    i0 = np.searchsorted(bounds, ev.gpu_start)
    i1 = np.searchsorted(bounds, ev.gpu_end)
    cover = np.zeros((4, nseg + 1), np.int64)
    for c in range(4):
        m = op_cat == c
        np.add.at(cover[c], i0[m], 1)
        np.add.at(cover[c], i1[m], -1)
    cov = np.cumsum(cover, axis=1)[:, :nseg] > 0
    C, M, N, O_ = cov[0], cov[1], cov[2], cov[3]
    # memory split: copies (memcpy kinds of category memory) and memory-bound kernels
    is_copy_kind = np.array([k.memcpy is not None for k in kinds], bool)[ev.gpu_ktype] & (op_cat == 1)
    split_cover = np.zeros((2, nseg + 1), np.int64)
    for row, m in ((0, is_copy_kind), (1, (op_cat == 1) & ~is_copy_kind)):
        np.add.at(split_cover[row], i0[m], 1)
        np.add.at(split_cover[row], i1[m], -1)
    P, K = np.cumsum(split_cover, axis=1)[:, :nseg] > 0
    busy = C | M | N | O_
    parts = {
        "compute_ns": C,
        "memory_ns": M & ~C,
        "other_ns": O_ & ~(C | M),
        "comms_exposed_ns": N & ~(C | M | O_),
        "comms_total_ns": N,
        "comms_hidden_ns": N & (C | M | O_),
        "memory_kernels_ns": K & ~C,
        "copies_ns": P & ~(C | K),
        "copies_total_ns": P,
    }
    prefix = {k: np.concatenate([[0], np.cumsum(np.where(v, seglen, 0))]) for k, v in parts.items()}

    # idle-gap classification helpers
    op_order = np.lexsort((ev.gpu_corr, ev.gpu_start))
    op_start_sorted = ev.gpu_start[op_order]
    api_order = np.argsort(ev.api_corr, kind="stable")
    api_corr_sorted = ev.api_corr[api_order]
    inp = [
        (s, e)
        for s, e, t in zip(ev.nvtx_start, ev.nvtx_end, ev.nvtx_text, strict=False)
        if e > s and INPUT_PATTERN.search(job.nvtx_texts[t])
    ]
    inp.sort()
    inp_start = np.array([s for s, _ in inp], np.int64)
    inp_maxend = (
        np.maximum.accumulate(np.array([e for _, e in inp], np.int64)) if inp else np.array([], np.int64)
    )
    sy_s, sy_e = _sync_calls(ev, job)
    so = np.argsort(sy_e, kind="stable")
    sy_s, sy_e = sy_s[so], sy_e[so]
    sy_suffix_min_s = np.minimum.accumulate(sy_s[::-1])[::-1] if len(sy_s) else sy_s
    # calls of positive length (only they can overlap the wait after a launch), sorted by end
    pos = sy_e > sy_s
    pw_s, pw_e = sy_s[pos], sy_e[pos]
    pw_suffix_min_s = np.minimum.accumulate(pw_s[::-1])[::-1] if len(pw_s) else pw_s

    def classify(windows: list[tuple[int, int]]) -> np.ndarray:
        """(len(windows), 5) idle split: launch_gap, input, sync, host_bound, other."""
        out = np.zeros((len(windows), 5), np.int64)
        if not windows:
            return out
        w_start = np.array([w[0] for w in windows], np.int64)
        w_end = np.array([w[1] for w in windows], np.int64)
        seg_w = np.searchsorted(w_start, bounds[:-1], side="right") - 1
        in_w = (seg_w >= 0) & (bounds[:-1] < w_end[np.clip(seg_w, 0, None)])
        idle = ~busy & in_w
        edge = np.isin(bounds[:-1], w_start)
        brk = idle & (~np.concatenate([[False], idle[:-1]]) | edge)
        run = np.cumsum(brk) - 1
        segs = np.flatnonzero(idle)
        if len(segs) == 0:
            return out
        rid = run[segs]
        first = np.flatnonzero(np.concatenate([[True], rid[1:] != rid[:-1]]))
        last = np.concatenate([first[1:], [len(segs)]]) - 1
        g0 = bounds[segs[first]]
        g1 = bounds[segs[last] + 1]
        wi = seg_w[segs[first]]
        glen = g1 - g0
        res = np.zeros((len(g0), 5), np.int64)
        to_end = g1 >= w_end[wi]
        j = np.clip(np.searchsorted(op_start_sorted, g1), 0, len(op_start_sorted) - 1)
        has_op = (op_start_sorted[j] == g1) & ~to_end
        corr = ev.gpu_corr[op_order[j]]
        k = np.clip(np.searchsorted(api_corr_sorted, corr), 0, max(len(api_corr_sorted) - 1, 0))
        has_api = has_op & (api_corr_sorted[k] == corr) if len(api_corr_sorted) else np.zeros_like(has_op)
        a_start = ev.api_start[api_order][k] if len(api_corr_sorted) else g0
        a_end = ev.api_end[api_order][k] if len(api_corr_sorted) else g0
        split = has_api & (a_end > g0)
        a = np.clip(a_start, g0, g1)
        # the wait after the launch call ended: [w, g1) when longer than the threshold
        w = np.clip(a_end, a, g1)
        waits = split & (g1 - w > DEPENDENCY_WAIT_NS)
        wait = np.where(waits, g1 - w, 0)
        if len(pw_e):
            q = np.searchsorted(pw_e, w, side="right")  # first call ending after w
            wait_sync = waits & (q < len(pw_e)) & (pw_suffix_min_s[np.clip(q, 0, len(pw_e) - 1)] < g1)
        else:
            wait_sync = np.zeros(len(g0), bool)
        res[:, 4] = np.where(split, np.where(wait_sync, 0, wait), glen)
        res[:, 0] = np.where(split, np.where(waits, w, g1) - a, 0)
        host = np.where(split, a - g0, 0)
        # input stall: an input range with start < a and end > g0 (non-empty ranges only)
        if len(inp_start):
            q = np.searchsorted(inp_start, a, side="left") - 1
            is_input = (q >= 0) & (inp_maxend[np.clip(q, 0, None)] > g0) & (host > 0)
        else:
            is_input = np.zeros(len(g0), bool)
        if len(sy_e):
            q = np.searchsorted(sy_e, g0, side="left")
            qc = np.clip(q, 0, len(sy_e) - 1)
            is_sync = (q < len(sy_e)) & ((sy_suffix_min_s[qc] < a) | (sy_e[qc] <= a)) & (host > 0)
        else:
            is_sync = np.zeros(len(g0), bool)
        res[:, 1] = np.where(is_input, host, 0)
        res[:, 2] = np.where(~is_input & is_sync, host, 0) + np.where(wait_sync, wait, 0)
        res[:, 3] = np.where(~is_input & ~is_sync, host, 0)
        np.add.at(out, wi, res)
        return out

    def rows(windows: list[tuple[int | None, int, int]]) -> list[dict]:
        split = classify([(s, e) for _, s, e in windows])
        result = []
        for (step, s, e), idle_split in zip(windows, split, strict=False):
            a, b = np.searchsorted(bounds, [s, e])
            row = {
                "rank": ev.rank,
                "step": step,
                "window_start_ns": int(s),
                "window_end_ns": int(e),
                "window_ns": int(e - s),
            }
            for key in parts:
                row[key] = int(prefix[key][b] - prefix[key][a])
            row["idle_ns"] = row["window_ns"] - int(np.sum(np.where(busy[a:b], seglen[a:b], 0)))
            for key, v in zip(IDLE_PARTS, idle_split, strict=False):
                row[key] = int(v)
            result.append(row)
        return result

    return rows([(None, *whole)]) + rows([(n, s, e) for n, s, e in steps])


def rank_kernel_stats(job: Job, ev: RankEvents) -> dict:
    kinds = job.catalog.kinds
    is_kernel = np.array([k.memcpy is None for k in kinds])[ev.gpu_ktype]
    names = np.array([k.name for k in kinds], dtype=object)
    dur = ev.gpu_end - ev.gpu_start
    by_name: dict[str, dict[str, int]] = {}
    for kt in np.unique(ev.gpu_ktype):
        m = ev.gpu_ktype == kt
        d = by_name.setdefault(str(names[kt]), {"count": 0, "total_ns": 0})
        d["count"] += int(m.sum())
        d["total_ns"] += int(dur[m].sum())
    return {
        "kernel_count": int(is_kernel.sum()),
        "memcpy_count": int((~is_kernel).sum()),
        "by_name": dict(sorted(by_name.items())),
    }


def baseline_windows(baseline: Job) -> dict[tuple[int, int], int]:
    """(rank, step) -> window_ns of the same job without its stragglers (same random draws)."""
    out = {}
    for ev in baseline.ranks:
        for step, start, end in _step_windows(ev, baseline.nvtx_texts):
            out[(ev.rank, step)] = end - start
    return out


def collectives(
    job: Job, windows: dict[tuple[int, int], int], baseline: dict[tuple[int, int], int] | None
) -> tuple[list[dict], dict | None]:
    """Per all-reduce instance: arrivals on the reference timeline, skew, waits; straggler cost.

    The cost is counterfactual: the job is simulated a second time without the straggler, with
    the same random draws, so the others' extra step time is exactly what the straggler costs.
    """
    R = job.cfg.ranks
    out = []
    slow = job.cfg.injections.straggler
    stragglers = sorted(r for r in slow if r < R)
    wait_by_step: dict[int, int] = {}
    for seq, c in enumerate(job.collectives):
        arr = c["arrival"] - job.session_start[0]
        end = c["end"] - job.session_start[0]
        top = int(arr.max())
        out.append(
            {
                "step": c["step"],
                "bucket": c["bucket"],
                "seq": seq,
                "bytes": int(c["bytes"]),
                "arrival_ns": [int(x) for x in arr],
                "end_ns": [int(x) for x in end],
                "last_rank": int(np.argmax(arr)),
                "arrival_skew_ns": int(top - arr.min()),
                "wait_ns": [int(top - x) for x in arr],
            }
        )
        if stragglers:
            others = np.delete(arr, stragglers)
            wait_by_step[c["step"]] = wait_by_step.get(c["step"], 0) + int(np.sum(top - others))
    if not stragglers or baseline is None:
        return out, None
    worst = max(stragglers, key=lambda r: slow[r])
    cost: dict[int, int] = {}
    delay: dict[int, int] = {}
    for (rank, step), w in windows.items():
        if rank in stragglers or (rank, step) not in baseline:
            continue
        extra = w - baseline[(rank, step)]
        cost[step] = cost.get(step, 0) + extra
        delay[step] = max(delay.get(step, extra), extra)
    info = {
        "rank": int(worst),
        "ranks": [int(r) for r in stragglers],
        "compute_slowdown_pct": slow[worst],
        "cost_definition": "sum over the other ranks of (step window_ns - the same step's window_ns when the "
        "job is simulated again without the straggler, same random draws): the GPU-ns the others lose",
        "cost_ns_by_step": {str(k): v for k, v in sorted(cost.items())},
        "cost_ns_total": int(sum(cost.values())),
        "step_delay_ns_by_step": {str(k): v for k, v in sorted(delay.items())},
        "collective_wait_definition": "sum over the other ranks and the step's all-reduces of (last "
        "arrival - own arrival): GPU-ns spent waiting inside NCCL kernels (partly hidden behind compute)",
        "collective_wait_ns_by_step": {str(k): v for k, v in sorted(wait_by_step.items())},
    }
    return out, info


def build(
    job: Job,
    files: dict[int, str],
    version: str,
    gpu: dict,
    per_rank: dict | None = None,
    baseline: Job | None = None,
) -> dict:
    """The ground_truth.json document."""
    from .schemas import VERSIONS

    cfg = job.cfg
    partition, ranks = [], []
    peak = gpu["peak_bf16_dense_flops"]
    for ev in job.ranks:
        rows, stats = per_rank[ev.rank] if per_rank else (rank_partition(job, ev), rank_kernel_stats(job, ev))
        for row in rows:
            if row["step"] is not None:
                flops = job.flops_per_step.get(row["step"], 0)
                row["model_flops"] = flops
                row["mfu"] = flops / (row["window_ns"] * 1e-9 * peak) if row["window_ns"] else None
        partition += rows
        ranks.append(
            {
                "rank": ev.rank,
                "node": ev.node,
                "local_rank": ev.rank % cfg.gpus_per_node,
                "file": files[ev.rank],
                "expected_kernel_count": stats["kernel_count"],
                "expected_memcpy_count": stats["memcpy_count"],
                "kernels_by_name": stats["by_name"],
            }
        )
    windows = {(r["rank"], r["step"]): r["window_ns"] for r in partition if r["step"] is not None}
    colls, straggler = collectives(job, windows, baseline_windows(baseline) if baseline else None)
    ref = int(job.session_start[0])
    kinds = {}
    for k in job.catalog.kinds:
        if k.flops:
            kinds.setdefault(
                k.name, {"name": k.name, "short_name": k.short, "category": k.category, "shapes": []}
            )
            entry = {**k.shape, "flops": k.flops}
            if entry not in kinds[k.name]["shapes"]:
                kinds[k.name]["shapes"].append(entry)
    return {
        "format": "nsight-analyze-synth-truth/1",
        "definitions": "docs/metrics.md (default step and input patterns); integer ns unless named",
        "generator": {
            "ranks": cfg.ranks,
            "gpus_per_node": cfg.gpus_per_node,
            "nodes": cfg.nodes,
            "steps": cfg.steps,
            "first_step": cfg.first_step,
            "seed": cfg.seed,
            "workload": cfg.workload,
            "kernels_per_step": cfg.kernels_per_step,
            "injections": cfg.injections.specs,
        },
        "schema": {
            "key": version,
            "nsys_version": VERSIONS[version].product_version,
            "export_schema_version": VERSIONS[version].schema_version,
        },
        "gpu": gpu,
        "ranks": ranks,
        "clock": {
            "convention": "reference_ns = file_ns + offset_ns[node]; the reference timeline is node 0's file "
            "timeline (its ranks have offset 0). Ranks of one node share one clock.",
            "reference_node": 0,
            "offset_ns": {str(n): int(job.session_start[n]) - ref for n in range(cfg.nodes)},
            "session_start_utc_ns": {str(n): int(job.utc_start[n]) for n in range(cfg.nodes)},
            "utc_clock_error_ns": {str(n): int(job.skew[n]) for n in range(cfg.nodes)},
            "note": "aligning by utcEpochNs alone gives offset_ns + (utc_clock_error_ns[node] - "
            "utc_clock_error_ns[0]); the collectives' common end recovers offset_ns exactly",
        },
        "model_flops_per_step": {str(k): v for k, v in sorted(job.flops_per_step.items())},
        "kernels_per_step": {str(k): v for k, v in sorted(job.kernels_per_step.items())},
        "flop_kernels": list(kinds.values()),
        "partition": partition,
        "collectives": colls,
        "straggler": straggler,
    }
