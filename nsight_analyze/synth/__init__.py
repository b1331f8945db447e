"""Synthetic multi-rank Nsight Systems exports with exact ground truth.

`generate()` simulates a data-parallel training job (or GEMM-only steps), writes one nsys SQLite
export per rank in the schema of a chosen nsys version, and returns (and writes beside the files)
`ground_truth.json`: the time partition, idle causes, clock offsets, collective skews, straggler
cost and model FLOPs computed by an implementation of docs/metrics.md independent of the SQL.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing as mp
import os
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from ..errors import UserError
from . import causes as _causes
from . import injection_truth as _injection_truth
from . import job as _job
from . import kernel_faults as _kernel_faults
from . import memory as _memory
from . import parallel as _parallel
from . import truth as _truth
from . import writer as _writer
from .injections import Injections, parse
from .kernels import PEAK_BF16_DENSE
from .schemas import VERSIONS
from .workload import Config

__all__ = ["generate", "parse", "Injections", "SCHEMAS", "WORKLOADS", "TRUTH_FILE"]

SCHEMAS = tuple(VERSIONS)
WORKLOADS = ("transformer", "gemm")
TRUTH_FILE = "ground_truth.json"

GPU_INFO = {
    "name": _writer.GPU_NAME,
    "sm_count": 132,
    "clock_hz": 1_980_000_000,
    "peak_bf16_dense_flops": PEAK_BF16_DENSE,
    "mfu_definition": "model_flops of the step on one rank / (window_ns * 1e-9 * peak_bf16_dense_flops)",
}


def generate(
    out_dir: str | Path,
    ranks: int = 8,
    gpus_per_node: int = 4,
    steps: int = 20,
    seed: int = 1,
    schema: str = "2025.1",
    kernels_per_step: int | None = None,
    injections: Iterable[str] | Injections = (),
    workload: str = "transformer",
    truth: bool = True,
    vacuum: bool = True,
    workers: int | None = None,
    parallel: str | None = None,
    nccl_trace: bool = False,
    ce_collectives: bool = False,
    work_scale: float = 1.0,
) -> dict:
    """Write `report_rank{R}.sqlite` for every rank (and ground_truth.json); return the truth dict.

    With truth=False only the traces are written (benchmark sizes) and the dict has no partition.
    workers: processes writing rank files (default: one per CPU, up to 8, for large jobs only).
    parallel: 'tp=T,pp=P,dp=D' for a 3D-parallel transformer job (synth/parallel.py; ranks must be
    T*P*D); nccl_trace: its NCCL NVTX payloads in the advanced NCCL trace form (with apiId);
    ce_collectives (with nccl_trace): copy-engine AllGathers, whose transfer is a memcpy counted as
    communication (truth: parallel.operations, partition). work_scale: every GPU operation but
    the collectives takes this share of its time (a strong-scaling series, synth/scaling.py).
    """
    if schema not in VERSIONS:
        raise UserError(f"unknown nsys schema {schema!r}; choose one of {', '.join(VERSIONS)}")
    if workload not in WORKLOADS:
        raise UserError(f"unknown workload {workload!r}; choose one of {', '.join(WORKLOADS)}")
    if ranks < 1 or gpus_per_node < 1 or steps < 1:
        raise UserError("ranks, gpus-per-node and steps must be at least 1")
    if gpus_per_node > 8:
        raise UserError("at most 8 GPUs per node")
    if kernels_per_step is not None and kernels_per_step < 1:
        raise UserError("kernels-per-step must be at least 1")
    inj = injections if isinstance(injections, Injections) else parse(list(injections))
    par = _parallel.parse_parallel(parallel)
    if par is not None and par.ranks != ranks:
        raise UserError(f"--parallel {par.spec} makes {par.ranks} ranks, not {ranks}")
    if par is not None and inj.specs:
        raise UserError("--inject is not supported with --parallel (the 3D-parallel job has no injections)")
    if par is not None and workload != "transformer":
        raise UserError("--parallel builds a transformer job; it cannot be combined with --workload gemm")
    if nccl_trace and par is None:
        raise UserError("--nccl-trace needs --parallel (only the 3D-parallel job writes NCCL payloads)")
    if ce_collectives and not nccl_trace:
        raise UserError("--ce-collectives needs --nccl-trace (copy-engine collectives are NCCL >= 2.28)")
    for r in inj.straggler:
        if r >= ranks:
            raise UserError(f"straggler rank {r} does not exist (ranks 0..{ranks - 1})")
    nodes = (ranks + gpus_per_node - 1) // gpus_per_node
    for n in inj.clock_skew_ms:
        if n >= nodes:
            raise UserError(f"clock-skew node {n} does not exist (nodes 0..{nodes - 1})")
    _causes.validate(inj, ranks, nodes, workload)
    cfg = Config(
        ranks=ranks,
        gpus_per_node=gpus_per_node,
        steps=steps,
        seed=seed,
        workload=workload,
        kernels_per_step=kernels_per_step,
        injections=inj,
        work_scale=work_scale,
    )
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UserError(f"{out} is a file; give a folder for the rank files")
    out.mkdir(parents=True, exist_ok=True)
    mine = {f"report_rank{r}.sqlite" for r in range(ranks)}
    stale = sorted(p.name for p in out.glob("report_rank*.sqlite") if p.name not in mine)
    if stale:  # a mixed folder would be ingested as one bigger job
        raise UserError(f"{out} already holds {stale[0]} from another job; use an empty folder")
    job, comm_truth = (
        _parallel.build(cfg, par, nccl_trace, ce_collectives) if par else (_job.build(cfg), None)
    )
    _kernel_faults.annotate(job)  # unfused-attention: emit_nvtx shape ranges around the softmaxes
    files = {ev.rank: _writer.rank_identity(job, ev.rank)["file"] for ev in job.ranks}
    per_rank = _write_all(job, out, schema, vacuum, workers, truth)
    if not truth:
        return {"files": files, "kernels_per_step": job.kernels_per_step}
    if comm_truth is not None:  # 3D-parallel job: partition and communication by dimension
        doc = _truth.build(job, files, schema, GPU_INFO, per_rank, None)
        doc["generator"]["parallel"] = par.spec
        doc["generator"]["nccl_trace"] = nccl_trace
        doc["generator"]["ce_collectives"] = ce_collectives
        doc["comms_by_dimension"] = comm_truth.pop("by_dimension")
        doc["comms_by_dimension_definition"] = comm_truth.pop("definition")
        doc["parallel"] = comm_truth
        (out / TRUTH_FILE).write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
        return doc
    baseline = None
    if inj.straggler:  # the same job without its stragglers, for the straggler's exact cost
        calm = dataclasses.replace(inj, straggler={})
        baseline = _job.build(dataclasses.replace(cfg, injections=calm))
    doc = _truth.build(job, files, schema, GPU_INFO, per_rank, baseline)
    doc.update(_injection_truth.cause_truth(cfg, job))  # attribution, whatif (issue 19)
    kernel_truth = _injection_truth.kernel_fault_truth(
        job
    )  # fp32-gemm, unfused-* injections; {} without them
    if kernel_truth:
        doc["kernel_faults"] = kernel_truth
    if inj.memory_usage:  # peak device memory of the CUDA_GPU_MEMORY_USAGE_EVENTS rows
        doc.update(_memory.truth_doc(job, _writer.GPU_TOTAL_MEMORY))
    (out / TRUTH_FILE).write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    return doc


_FORKED: tuple | None = None  # (job, out, schema, vacuum, truth) inherited by forked workers


def _write_some(ranks: list[int]) -> dict[int, tuple[list[dict], dict]]:
    """Write these ranks' files and, when asked, compute their truth rows (both per-rank work)."""
    job, out, schema, vacuum, truth = _FORKED
    bulk = _writer.bulk_connection()
    result = {}
    try:
        for r in ranks:
            ev = job.ranks[r]
            _writer.write_rank(
                job, ev, out / _writer.rank_identity(job, r)["file"], schema, bulk, vacuum=vacuum
            )
            if truth:
                result[r] = (_truth.rank_partition(job, ev), _truth.rank_kernel_stats(job, ev))
    finally:
        bulk.close()
    return result


def _write_all(
    job, out: Path, schema: str, vacuum: bool, workers: int | None, truth: bool
) -> dict[int, tuple[list[dict], dict]]:
    """Write every rank's file; large jobs fan out to forked processes (files are independent)."""
    global _FORKED
    rows = sum(len(ev.gpu_start) + len(ev.api_start) for ev in job.ranks)
    if workers is None:
        workers = min(os.cpu_count() or 1, 8) if rows > 2_000_000 else 1
    workers = max(1, min(workers, len(job.ranks)))
    _FORKED = (job, out, schema, vacuum, truth)
    try:
        ranks = [ev.rank for ev in job.ranks]
        if workers == 1 or "fork" not in mp.get_all_start_methods():
            return _write_some(ranks)
        chunks = [ranks[i::workers] for i in range(workers)]
        per_rank: dict[int, tuple[list[dict], dict]] = {}
        with ProcessPoolExecutor(workers, mp_context=mp.get_context("fork")) as pool:
            for f in [pool.submit(_write_some, c) for c in chunks]:
                per_rank.update(f.result())
        return per_rank
    finally:
        _FORKED = None
