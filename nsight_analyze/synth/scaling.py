"""A scaling series of synthetic runs with its ground truth: the same model on N1 < N2 < ... GPUs.

Why: `runs --scaling` says how efficiency falls with the GPU count and where the loss goes;
only a series whose every run is known exactly can check that. Each run is one `generate()`
job in its own folder (`n{N}/`, with a `run.json` label file: name, scaling, model,
world_size), so one ingest of the series' folder holds every run. What changes with N:
- the gradient all-reduce takes a ring's time, 2(N-1)/N x bytes / bus bandwidth (+ a fixed
  latency; synth/programs.py: 200 GB/s inside a node, 150 GB/s across nodes), so it grows
  with N and with the step to more than one node;
- strong scaling (same global work): every other GPU operation takes N1/N of its time
  (`work_scale`), and what is per sample shrinks with the per-GPU batch by the same factor: the
  input copy's bytes (synth/workload.py Catalog) and the activation blocks of the memory-usage
  device-memory events (synth/memory.py; a series takes no --inject, so it writes none); weak
  scaling (same work per GPU): unchanged;
- optionally a straggler (rank 1, compute +PCT %) in the runs of at least `straggler_from` GPUs;
- the `global_batch` label: SAMPLES_PER_GPU x N1 samples per step (strong: the same global
  work) or SAMPLES_PER_GPU x N (weak), so `runs` has a throughput to compute.
`scaling_truth.json` states each run's efficiency and the split of its loss, computed from the
generator's own partition of every rank and step (ground_truth.json `partition`, synth/truth.py,
independent of the SQL) with the definitions of docs/runs.md.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import UserError

TRUTH_FILE = "scaling_truth.json"
MODEL = "synth-transformer"
PARTS = ("compute", "exposed_comms", "imbalance", "idle")
SAMPLES_PER_GPU = 4  # samples per GPU per step of the baseline (the global_batch label)


def parse_sizes(text: str) -> list[int]:
    """'8,16,32' -> [8, 16, 32] (increasing, each at least 1)."""
    try:
        sizes = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise UserError(f"--scaling {text!r}: give GPU counts, e.g. 8,16,32") from None
    if len(sizes) < 2 or any(n < 1 for n in sizes) or sorted(set(sizes)) != sizes:
        raise UserError(f"--scaling {text!r}: give at least two increasing GPU counts, e.g. 8,16,32")
    return sizes


def run_parts(partition: list[dict]) -> dict[str, float]:
    """One run's mean job step time and its parts (docs/runs.md), from per-rank, per-step rows:
    per step, T = the longest window, busy = mean compute+memory+other, w = min(mean exposed
    comms, max compute - mean compute), exposed = mean exposed - w, imbalance = T - mean window
    + w, idle = mean idle; then means over the steps every rank has."""
    by_step: dict[int, list[dict]] = {}
    for row in partition:
        if row["step"] is not None:
            by_step.setdefault(row["step"], []).append(row)
    ranks = len({row["rank"] for row in partition})
    steps = [rows for _, rows in sorted(by_step.items()) if len(rows) == ranks]
    if not steps:
        raise ValueError("no step every rank has")
    acc = {"step_ns": 0.0, **{p: 0.0 for p in PARTS}}
    longest = []
    for rows in steps:
        n = len(rows)

        def mean(key: str, rows: list[dict] = rows, n: int = n) -> float:
            return sum(r[key] for r in rows) / n

        t = max(r["window_ns"] for r in rows)
        longest.append(t)
        wait = min(mean("comms_exposed_ns"), max(r["compute_ns"] for r in rows) - mean("compute_ns"))
        acc["step_ns"] += t
        acc["compute"] += mean("compute_ns") + mean("memory_ns") + mean("other_ns")
        acc["exposed_comms"] += mean("comms_exposed_ns") - wait
        acc["imbalance"] += t - mean("window_ns") + wait
        acc["idle"] += mean("idle_ns")
    longest.sort()
    half = len(longest) // 2
    median = longest[half] if len(longest) % 2 else (longest[half - 1] + longest[half]) / 2
    return {k: v / len(steps) for k, v in acc.items()} | {"steps": len(steps), "step_median_ns": median}


def global_batch(sizes: list[int], n: int, weak: bool) -> int:
    """Samples per step of the run on n GPUs: fixed by the baseline (strong), per GPU (weak)."""
    return SAMPLES_PER_GPU * (n if weak else sizes[0])


def series_truth(docs: dict[int, dict], weak: bool) -> dict:
    """Efficiency and loss split of every run against the first (smallest) one."""
    sizes = sorted(docs)
    parts = {n: run_parts(docs[n]["partition"]) for n in sizes}
    base_n = sizes[0]
    base = parts[base_n]
    runs = []
    for n in sizes:
        p = parts[n]
        scale = 1.0 if weak else base_n / n
        ideal = base["step_ns"] * scale
        loss = {k: p[k] - base[k] * scale for k in PARTS}
        batch = global_batch(sizes, n, weak)
        runs.append(
            {
                "name": f"n{n}",
                "gpus": n,
                "steps": p["steps"],
                "step_ns": p["step_ns"],
                "ideal_step_ns": ideal,
                "efficiency": ideal / p["step_ns"],
                "loss_ns": p["step_ns"] - ideal,
                "loss_parts_ns": loss,
                "loss_points": {k: 100.0 * v / p["step_ns"] for k, v in loss.items()},
                "step_parts_ns": {k: p[k] for k in PARTS},
                "step_median_ns": p["step_median_ns"],
                "global_batch": batch,
                "samples_per_s": batch / (p["step_median_ns"] * 1e-9),
            }
        )
    return {
        "format": "nsight-analyze-synth-scaling/1",
        "mode": "weak" if weak else "strong",
        "baseline": f"n{base_n}",
        "definitions": "docs/runs.md; efficiency strong T_base*N_base/(T*N), weak T_base/T; T = mean job "
        "step time; loss_parts_ns sum to loss_ns; loss_points = 100 * part / T; samples_per_s = "
        "global_batch / median job step time",
        "tolerance": "exact up to float rounding (the partition of every rank and step is exact)",
        "runs": runs,
    }


def generate_series(
    out_dir: str | Path,
    sizes: list[int],
    weak: bool = False,
    straggler_from: int | None = None,
    straggler_pct: float = 20.0,
    **job: object,
) -> dict:
    """Write one run per GPU count under out_dir (`n{N}/`, its traces, ground_truth.json and
    run.json) and `scaling_truth.json`; return the series truth. `job`: generate()'s other
    options (steps, seed, gpus_per_node, kernels_per_step, schema)."""
    from . import generate

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    mode = "weak" if weak else "strong"
    docs = {}
    for n in sizes:
        folder = out / f"n{n}"
        inject = (
            [f"straggler=1:+{straggler_pct:g}"] if straggler_from is not None and n >= straggler_from else []
        )
        if inject and n < 2:
            raise UserError("a straggler needs at least 2 GPUs (it is rank 1)")
        docs[n] = generate(
            folder, ranks=n, injections=inject, work_scale=1.0 if weak else sizes[0] / n, **job
        )
        labels = {
            "name": f"n{n}",
            "scaling": mode,
            "model": MODEL,
            "world_size": n,
            "series": out.name,
            "global_batch": global_batch(sizes, n, weak),
        }
        (folder / "run.json").write_text(json.dumps(labels, indent=1) + "\n")
    truth = series_truth(docs, weak)
    truth["generator"] = {
        "sizes": sizes,
        "straggler": None
        if straggler_from is None
        else {"rank": 1, "from": straggler_from, "pct": straggler_pct},
        "all_reduce": "ring: 2(N-1)/N * bytes / busbw + 8 us; busbw 200 GB/s in one node, 150 GB/s across",
        "work_scale": {f"n{n}": (1.0 if weak else sizes[0] / n) for n in sizes},
        "scaled_by_work_scale": "every GPU operation's time but the collectives; the input copy's bytes",
    }
    (out / TRUTH_FILE).write_text(json.dumps(truth, indent=1) + "\n")
    return truth
