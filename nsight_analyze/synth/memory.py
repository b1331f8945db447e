"""Device-memory events of the `memory-usage` injection (nsys --cuda-memory-usage) and their truth.

What a training rank allocates, in the layout of CUDA_GPU_MEMORY_USAGE_EVENTS
(data/nsys_cuda_gpu_memory_usage.sql): model state once before the first GPU op (Device and
Device Static memory) and a pinned host staging buffer (host memory: not device memory, so not
counted), then activation blocks of varying size allocated just before every `stride`-th GPU op and
freed just after the op `HOLD` blocks later, so several are live at once and the peak is reached
mid-run, not at the end. The peak is computed here by replaying the rows in the order the SQL
uses (time, frees before allocations at the same ns, then address): a running sum of the
allocations minus the frees of Device / Device Static memory, in numpy, independent of the reader.

Activations are per sample, model state is not: the activation blocks take `work_scale` (the
job's cfg: B / 32 in a batch-size sweep, synth/sweep.py; N1 / N in a strong-scaling series, whose
per-GPU batch shrinks, synth/scaling.py) of their size, so the peak grows with the batch; model
state, optimizer state and the pinned staging buffer stay. work_scale 1 writes the same rows as
before the blocks scaled (activation_bytes returns the size as built; tests/test_runs_sweep.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .job import Job, RankEvents

DDL = Path(__file__).resolve().parents[1] / "data" / "nsys_cuda_gpu_memory_usage.sql"
MIB = 1 << 20
PAGEABLE, PINNED, DEVICE, DEVICE_STATIC = 0, 1, 2, 5  # ENUM_CUDA_MEM_KIND
DEVICE_KINDS = (DEVICE, DEVICE_STATIC)
ALLOC, FREE = 0, 1  # memoryOperationType
BLOCKS = 400  # activation blocks per rank (at most)
HOLD = 6  # blocks live at once


def activation_bytes(base: int, work_scale: float) -> int:
    """An activation block of `base` bytes in the job as built, at `work_scale` of its batch
    (whole bytes, at least 1; work_scale 1: `base` itself)."""
    return base if work_scale == 1.0 else max(1, int(round(base * work_scale)))


def events(job: Job, ev: RankEvents) -> dict[str, np.ndarray]:
    """start, bytes, memKind, memoryOperationType, address of one rank's rows (file order = time order)."""
    n = len(ev.gpu_start)
    if n == 0:
        return {k: np.zeros(0, np.int64) for k in ("start", "bytes", "memKind", "op", "address")}
    order = np.argsort(ev.gpu_start, kind="stable")
    t0 = int(ev.gpu_start[order[0]])
    rank = ev.rank
    starts = [t0 - 3000, t0 - 2000, t0 - 1000]
    sizes = [6144 * MIB + rank * 16 * MIB, 32 * MIB, 1024 * MIB]
    kinds = [DEVICE, DEVICE_STATIC, PINNED]
    ops = [ALLOC, ALLOC, ALLOC]
    slots = [0, 1, 2]
    stride = max(1, n // BLOCKS)
    picks = order[::stride]
    scale = job.cfg.work_scale  # activations: per sample (the batch's share of the job as built)
    for j, op_index in enumerate(picks):
        size = activation_bytes((64 + 32 * ((j * 5 + rank) % 8)) * MIB, scale)
        freed_after = picks[min(j + HOLD, len(picks) - 1)]
        starts += [int(ev.gpu_start[op_index]) - 1, int(ev.gpu_end[freed_after]) + 1]
        sizes += [size, size]
        kinds += [DEVICE, DEVICE]
        ops += [ALLOC, FREE]
        slots += [3 + j, 3 + j]  # a free names its allocation's address
    address = 0x7F0000000000 + np.array(slots, np.int64) * (1 << 32)
    out = {
        "start": np.array(starts, np.int64),
        "bytes": np.array(sizes, np.int64),
        "memKind": np.array(kinds, np.int64),
        "op": np.array(ops, np.int64),
        "address": address,
    }
    time_order = np.lexsort((out["address"], -out["op"], out["start"]))
    return {k: v[time_order] for k, v in out.items()}


def rank_truth(job: Job, ev: RankEvents) -> dict:
    """Peak device bytes in use of one rank (running sum of Device / Device Static rows)."""
    e = events(job, ev)
    device = np.isin(e["memKind"], DEVICE_KINDS)
    order = np.lexsort((e["address"], -e["op"], e["start"]))
    signed = np.where(e["op"] == ALLOC, e["bytes"], -e["bytes"]) * device
    running = np.cumsum(signed[order])
    if not len(running):
        return {"rank": ev.rank, "rows": 0, "device_rows": 0, "peak_bytes_in_use": None, "peak_ts_ns": None}
    at = int(np.argmax(running))
    return {
        "rank": ev.rank,
        "rows": int(len(e["start"])),
        "device_rows": int(device.sum()),
        "peak_bytes_in_use": int(running[at]),
        "peak_ts_ns": int(e["start"][order][at]),
        "final_bytes_in_use": int(running[-1]),
    }


def truth_doc(job: Job, capacity_bytes: int) -> dict:
    """The ground-truth section of the injection."""
    ranks = [rank_truth(job, ev) for ev in job.ranks]
    return {
        "memory_usage": {
            "definition": "bytes_in_use = running sum over CUDA_GPU_MEMORY_USAGE_EVENTS rows of Device and "
            "Device Static memory (+bytes allocation, -bytes free), in time order (frees before "
            "allocations at the same ns); peak = its maximum; capacity = TARGET_INFO_GPU.totalMemory",
            "capacity_bytes": capacity_bytes,
            "ranks": ranks,
        }
    }


def write(con, job: Job, ev: RankEvents, global_pid: int, device_id: int) -> None:
    """Create CUDA_GPU_MEMORY_USAGE_EVENTS in an open sqlite3 export and insert the rank's rows."""
    con.executescript(DDL.read_text())
    e = events(job, ev)
    rows = [
        (int(s), global_pid, device_id, 1, int(a), 0x7F00DEAD0000 + i, int(b), int(k), int(o), None, None)
        for i, (s, b, k, o, a) in enumerate(
            zip(e["start"], e["bytes"], e["memKind"], e["op"], e["address"], strict=True)
        )
    ]
    con.executemany(
        "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS (start, globalPid, deviceId, contextId, address, pc, "
        "bytes, memKind, memoryOperationType, name, correlationId) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
