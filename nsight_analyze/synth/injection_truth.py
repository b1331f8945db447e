"""Ground truth of the injections, measured on the generated job: the causes of a slow rank
(`cause_truth`: attribution, and the step times of the job simulated again without each cause, for
`whatif`) and the kernel-level faults (`kernel_fault_truth`: their kernels per rank and step).

Why not beside their injections (causes.py, kernel_faults.py): the simulator builds the job from
those (workload, programs and job import them), while the truth reads the built job's step windows
(truth.py) and simulates it again (job.build); from here it closes no import circle.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from . import job as _job
from . import workload as W
from .causes import CAUSE_OF, spec_name
from .kernel_faults import GELU_CHAIN, KEYS, TAG
from .truth import _step_windows


def _calm(inj):
    """The same injections without the causes of a slow rank (same program shape, same draws)."""
    shape = max([*inj.uneven_work.values(), inj.uneven_shape_pct, 0.0])
    return dataclasses.replace(
        inj, straggler={}, slow_gpu={}, uneven_work={}, slow_host={}, slow_link={}, uneven_shape_pct=shape
    )


def _step_times(job) -> dict[int, int]:
    """Per step: the job's step time = the longest step window over its ranks (docs/whatif.md)."""
    out: dict[int, int] = {}
    for ev in job.ranks:
        for step, start, end in _step_windows(ev, job.nvtx_texts):
            out[step] = max(out.get(step, 0), int(end - start))
    return dict(sorted(out.items()))


def _rows(scenario: str, times: dict[int, int]) -> list[dict]:
    rows = [{"scenario": scenario, "step": s, "step_time_ns": t} for s, t in times.items()]
    if times:
        rows.append(
            {"scenario": scenario, "step": None, "step_time_ns": int(round(np.mean(list(times.values()))))}
        )
    return rows


def cause_truth(cfg, job) -> dict:
    """`attribution`, `whatif` (re-simulated) and `whatif_actual` for ground_truth.json."""
    inj = cfg.injections
    attribution = []
    for r, pct in sorted(inj.straggler.items()):
        attribution.append({"injection": f"straggler={r}:+{pct:g}", "rank": r, "cause": "slow-gpu"})
    for key, cause in CAUSE_OF.items():
        for who, pct in sorted(getattr(inj, key).items()):
            spec = f"{spec_name(key)}={who}:+{pct:g}"
            targets = [r for r in range(cfg.ranks) if cfg.node_of(r) == who] if key == "slow_link" else [who]
            for r in targets:
                attribution.append({"injection": spec, "rank": r, "cause": cause})
    actual = _step_times(job)
    whatif: list[dict] = []
    if attribution:
        calm = _job.build(dataclasses.replace(cfg, injections=_calm(inj)))
        whatif += _rows("slowest-rank-at-median", _step_times(calm))
    if inj.input_stall:
        free = dataclasses.replace(inj, input_stall=None, input_wait_free=True)
        calm = _job.build(dataclasses.replace(cfg, injections=free))
        whatif += _rows("no-input-stalls", _step_times(calm))
    calm = _job.build(dataclasses.replace(cfg, injections=dataclasses.replace(inj, comms_free=True)))
    whatif += _rows("comms-hidden", _step_times(calm))
    for scenario, flag in (("no-launch-gaps", "launch_free"), ("no-sync-stalls", "sync_free")):
        calm = _job.build(dataclasses.replace(cfg, injections=dataclasses.replace(inj, **{flag: True})))
        whatif += _rows(scenario, _step_times(calm))
    return {
        "attribution": attribution,
        "whatif_definition": "step_time_ns = max over ranks of the step's window_ns in the job simulated "
        "again without the cause (same random draws); step null = mean over steps. slowest-rank-at-median: "
        "without straggler, slow-gpu, uneven-work, slow-host and slow-link; no-input-stalls: without "
        "input-stall and with a data loader that takes no time; comms-hidden: every collective ends at its "
        "last arrival (no transfer); no-launch-gaps: kernel launches cost the host no time "
        "(no host work before them, no call, no latency: what CUDA graphs buy at best); no-sync-stalls: a "
        "synchronising call returns the moment the GPU work it waits for ends (no wake-up delay)",
        "whatif": whatif,
        "whatif_actual": _rows("actual", actual),
    }


def kernel_fault_truth(job) -> dict:
    """Ground truth of the kernel-level injections, from the generated events themselves."""
    inj = job.cfg.injections
    specs = [s for s in inj.specs if s.split("=")[0].strip().lower() in KEYS]
    if not specs:
        return {}
    kinds = job.catalog.kinds
    out: dict = {"specs": specs, "unfused_elementwise": [], "fp32_gemm": [], "unfused_attention": []}
    for ev in job.ranks:
        wins = _step_windows(ev, job.nvtx_texts)
        comp = [i for i in range(len(ev.gpu_start)) if ev.gpu_stream[i] == W.COMPUTE_STREAM]
        tags = [kinds[ev.gpu_ktype[i]].shape.get(TAG) for i in comp]

        def step_of(ns: int, wins=wins) -> int | None:
            return next((s for s, a, b in wins if a <= ns < b), None)

        acc: dict[tuple, dict] = {}

        def row(kind: str, step, acc=acc, ev=ev) -> dict:
            return acc.setdefault(
                (kind, step),
                {
                    "rank": ev.rank,
                    "step": step,
                    "chains": 0,
                    "kernels": 0,
                    "kernel_ns": 0,
                    "span_ns": 0,
                    "recoverable_ns": 0,
                    "flops": 0,
                },
            )

        j = 0
        while j < len(comp):
            i, tag = comp[j], tags[j]
            if tag == "unfused-elementwise":
                n = len(GELU_CHAIN)
                idx = comp[j : j + n]
                durs = [int(ev.gpu_end[x] - ev.gpu_start[x]) for x in idx]
                r = row("unfused_elementwise", step_of(int(ev.gpu_start[idx[0]])))
                span = int(ev.gpu_end[idx[-1]] - ev.gpu_start[idx[0]])
                r["chains"] += 1
                r["kernels"] += n
                r["kernel_ns"] += sum(durs)
                r["span_ns"] += span
                r["recoverable_ns"] += span - max(durs)  # fused kernel >= the longest member
                j += n
                continue
            if tag == "fp32-gemm":
                r = row("fp32_gemm", step_of(int(ev.gpu_start[i])))
                r["kernels"] += 1
                r["kernel_ns"] += int(ev.gpu_end[i] - ev.gpu_start[i])
                r["flops"] += kinds[ev.gpu_ktype[i]].flops
            elif tag == "unfused-attention" and kinds[ev.gpu_ktype[i]].shape["role"].startswith("softmax"):
                prev, nxt = comp[j - 1], comp[j + 1]
                r = row("unfused_attention", step_of(int(ev.gpu_start[prev])))
                sh = kinds[ev.gpu_ktype[i]].shape
                bwd = sh["role"] == "softmax_bwd"
                r["chains"] += 1
                r["kernels"] += 5 if bwd else 3
                r["span_ns"] += int(ev.gpu_end[nxt] - ev.gpu_start[prev])
                r["recoverable_ns"] += int(ev.gpu_start[nxt] - ev.gpu_end[prev])  # softmax + gaps
                r["flops"] += (4 if bwd else 2) * kinds[ev.gpu_ktype[prev]].flops
                r["score_matrix_bytes"] = sh["batch"] * sh["heads"] * sh["seq"] ** 2 * 2
            j += 1
        for (kind, _step), r in sorted(acc.items(), key=lambda x: (x[0][0], x[0][1] is None, x[0][1] or 0)):
            out[kind].append(r)
    out["definitions"] = (
        "per rank and step (the step window holding the chain's first kernel): unfused_elementwise: "
        "chains of the 8 eager-GELU kernels, recoverable = span - longest kernel; fp32_gemm: the FP32 "
        "GEMM launches, their time and FLOPs (2*M*N*K); unfused_attention: sequences (forward "
        "bmm-softmax-bmm, backward bmm-bmm-softmax_bwd-bmm-bmm), span = the two GEMMs around the "
        "softmax, recoverable = time between them (softmax and gaps), flops = the sequence's bmm FLOPs, "
        "score_matrix_bytes = b*h*n^2*2 (bf16)"
    )
    return out
