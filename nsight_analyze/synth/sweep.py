"""A batch-size sweep of synthetic runs with its ground truth: the same model and GPUs, B1 < B2 < ...
samples per GPU.

Why: `runs --by batch` (and `--over time --metric samples_per_s`) answer which batch size is best
and why throughput rises, then saturates; only a sweep whose every run is known exactly can check
that. Each run is one `generate()` job in its own folder (`b{B}/`, with a `run.json` label file),
so one ingest of the sweep's folder holds every run. The model:

- `batch` is the **per-GPU** batch (samples one GPU processes per step). The generator's job as
  built (`work_scale` 1) stands for REF_BATCH = 32 samples per GPU; a run of batch B is built with
  `work_scale` = B / 32, so every GPU operation but the collectives takes B/32 of its time: the
  GEMMs (compute per step), the memory-bound kernels (softmax, norms, elementwise) and the copies
  (the input batch's HtoD memcpy). The generator has one knob for all three, so compute and
  memory scale together, linearly with the batch (same seed: the same random draws in every run,
  so their per-step time is proportional to B up to 1 ns of rounding per operation);
- per sample, so scaled as well: the bytes of the input copy (its apparent bandwidth stays the
  link's) and, with `--inject memory-usage`, the activation blocks of the device-memory events
  (synth/memory.py); model state, optimizer state and the pinned staging buffer are not, so the
  device-memory peak grows with B but is not proportional to it;
- the gradient all-reduce is the same in every run (its bytes depend on the model, not the
  batch; the same ranks, so the same ring time): larger batches amortise it, and the backward
  pass hides more of it. Step time is about a x B + c, samples/s = B x N / (a x B + c): it rises
  with B and saturates at N / a, so the best run by throughput is (in this model) the largest
  batch, with the gains shrinking towards it;
- not scaled (the generator has no knob for them): the model FLOPs of ground_truth.json (`mfu`
  there counts the job as built, so it is not the sweep's MFU: the sweep truth states none).

Labels (`run.json`): name `b{B}`, sweep `batch` (the label the sweep varies), series (the sweep's
folder name), model, batch (per GPU), world_size (the ranks) and global_batch = batch x
world_size (samples of one step of the whole job: `runs` reads it as samples per step). No
`scaling` label: a sweep is never a scaling series.

`sweep_truth.json` states per run, from the generator's own partition of every rank and step
(ground_truth.json `partition`, synth/truth.py, independent of the SQL), over the steps every
rank has: the job step time (a step's longest window over the ranks; mean and median over the
steps, scaling.run_parts), its parts (compute, exposed_comms, imbalance, idle: docs/runs.md),
steps/s and samples/s (1e9 / median, global_batch x that), the partition shares of the windows
(sums over ranks and steps / the windows' sum, as `runs` defines them), per rank and step means
of the partition columns, the all-reduce bytes per step, and the best run by samples/s. With
`--inject memory-usage`, per run `memory_peak`: each rank's peak device bytes in use as
synth/memory.py replays its own rows (ground_truth.json `memory_usage`, independent of the SQL)
and their maximum over the ranks, what `runs` shows as the run's peak; null without it.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import UserError
from ..partition import MEMORY_PARTS, PARTS
from .scaling import MODEL, run_parts

TRUTH_FILE = "sweep_truth.json"
REF_BATCH = 32  # samples per GPU that the generator's job as built (work_scale 1) stands for
SWEEP_KEYS = ("batch",)  # labels a sweep can vary (the generator models the batch size only)
# share name -> partition column (docs/runs.md "One row per run": shares of the step windows)
SHARE_COLUMNS = {
    "compute": "compute_ns",
    "memory": "memory_ns",
    "memory_kernels": "memory_kernels_ns",
    "copies": "copies_ns",
    "other": "other_ns",
    "exposed_comms": "comms_exposed_ns",
    "idle": "idle_ns",
}
STEP_COLUMNS = ("window_ns", *PARTS, *MEMORY_PARTS, "comms_total_ns")


def parse_sweep(text: str) -> tuple[str, list[int]]:
    """'batch=8,16,32' -> ('batch', [8, 16, 32]): at least two increasing batch sizes >= 1."""
    key, sep, values = text.partition("=")
    key = key.strip().lower()
    example = "e.g. batch=8,16,32,64"
    if not sep or key not in SWEEP_KEYS:
        raise UserError(f"--sweep {text!r}: give {'|'.join(SWEEP_KEYS)}=B1,B2,..., {example}")
    try:
        sizes = [int(t) for t in values.split(",") if t.strip()]
    except ValueError:
        raise UserError(f"--sweep {text!r}: batch sizes are whole numbers, {example}") from None
    if len(sizes) < 2 or any(b < 1 for b in sizes) or sorted(set(sizes)) != sizes:
        raise UserError(f"--sweep {text!r}: give at least two increasing batch sizes >= 1, {example}")
    return key, sizes


def work_scale(batch: int) -> float:
    """The generator's `work_scale` of a run of `batch` samples per GPU (job as built: REF_BATCH)."""
    return batch / REF_BATCH


def _full_steps(partition: list[dict]) -> list[dict]:
    """The per-rank, per-step rows of the steps every rank has (the steps `runs` counts)."""
    ranks = len({row["rank"] for row in partition})
    have: dict[int, int] = {}
    for row in partition:
        if row["step"] is not None:
            have[row["step"]] = have.get(row["step"], 0) + 1
    return [row for row in partition if row["step"] is not None and have[row["step"]] == ranks]


def run_numbers(doc: dict) -> dict:
    """One run's shares of its step windows and per rank and step means (ns) of the partition
    columns, over the steps every rank has; and its all-reduce bytes per step."""
    rows = _full_steps(doc["partition"])
    window = sum(r["window_ns"] for r in rows)
    shares = {name: sum(r[col] for r in rows) / window for name, col in SHARE_COLUMNS.items()}
    per_step = {col: sum(r[col] for r in rows) / len(rows) for col in STEP_COLUMNS}
    stepped = [c for c in doc["collectives"] if c["step"] is not None]
    steps = {c["step"] for c in stepped}
    allreduce = sum(c["bytes"] for c in stepped) / len(steps) if steps else 0.0
    return {"shares": shares, "per_rank_step_ns": per_step, "allreduce_bytes_per_step": allreduce}


def memory_peak(doc: dict) -> dict | None:
    """One run's device-memory peak: per rank (synth/memory.py's replay, ground_truth.json
    `memory_usage`) and the maximum over its ranks; None when the run has no memory-usage rows."""
    section = doc.get("memory_usage")
    if section is None:
        return None
    per_rank = {str(r["rank"]): r["peak_bytes_in_use"] for r in section["ranks"]}
    known = [v for v in per_rank.values() if v is not None]
    return {
        "per_rank_bytes": per_rank,
        "max_bytes": max(known) if known else None,
        "capacity_bytes": section["capacity_bytes"],
    }


def sweep_truth(docs: dict[int, dict], ranks: int) -> dict:
    """Every run's step time, throughput, partition shares, and the best run by samples/s."""
    runs = []
    previous = None
    for batch in sorted(docs):
        parts = run_parts(docs[batch]["partition"])
        numbers = run_numbers(docs[batch])
        global_batch = batch * ranks
        median = parts["step_median_ns"]
        samples = global_batch / (median * 1e-9)
        runs.append(
            {
                "name": f"b{batch}",
                "batch": batch,
                "world_size": ranks,
                "global_batch": global_batch,
                "work_scale": work_scale(batch),
                "steps": parts["steps"],
                "step_mean_ns": parts["step_ns"],
                "step_median_ns": median,
                "steps_per_s": 1e9 / median,
                "samples_per_s": samples,
                "samples_per_s_gain": None if previous is None else samples / previous - 1.0,
                "step_parts_ns": {k: parts[k] for k in ("compute", "exposed_comms", "imbalance", "idle")},
                **numbers,
                "memory_peak": memory_peak(docs[batch]),
            }
        )
        previous = samples
    best = max(runs, key=lambda r: r["samples_per_s"])
    return {
        "format": "nsight-analyze-synth-sweep/1",
        "sweep": "batch",
        "model": MODEL,
        "best": {"metric": "samples_per_s", "run": best["name"]},
        "definitions": "synth/sweep.py and docs/runs.md; over the steps every rank has: job step = the "
        "step's longest window over the ranks, step_mean_ns / step_median_ns over the steps; "
        "steps_per_s = 1e9 / step_median_ns; samples_per_s = global_batch (batch x world_size) / "
        "median step; shares = partition column summed over ranks and steps / windows summed; "
        "per_rank_step_ns = the same sums / (ranks x steps); samples_per_s_gain = over the previous "
        "(smaller) batch; best = the highest samples_per_s; memory_peak (with memory-usage) = "
        "each rank's peak device bytes in use (synth/memory.py) and their max over the ranks",
        "tolerance": "exact up to float rounding (the partition of every rank and step is exact)",
        "runs": runs,
    }


def generate_sweep(out_dir: str | Path, batches: list[int], ranks: int = 8, **job: object) -> dict:
    """Write one run per batch size under out_dir (`b{B}/`: its traces, ground_truth.json and
    run.json) and `sweep_truth.json`; return the sweep truth. `job`: generate()'s other options
    (gpus_per_node, steps, seed, schema, kernels_per_step, injections: the same in every run)."""
    from . import generate

    if len(batches) < 2 or any(b < 1 for b in batches) or sorted(set(batches)) != list(batches):
        raise UserError(f"a sweep needs at least two increasing batch sizes >= 1, not {batches}")
    if "work_scale" in job:
        raise UserError("a sweep sets work_scale from the batch size; do not give it")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    docs = {}
    for batch in batches:
        folder = out / f"b{batch}"
        docs[batch] = generate(folder, ranks=ranks, work_scale=work_scale(batch), **job)
        labels = {
            "name": f"b{batch}",
            "sweep": "batch",
            "series": out.name,
            "model": MODEL,
            "batch": batch,
            "world_size": ranks,
            "global_batch": batch * ranks,
        }
        (folder / "run.json").write_text(json.dumps(labels, indent=1) + "\n")
    truth = sweep_truth(docs, ranks)
    truth["generator"] = {
        "batches": list(batches),
        "ranks": ranks,
        "ref_batch": REF_BATCH,
        "work_scale": {f"b{b}": work_scale(b) for b in batches},
        "scaled": "every GPU operation but the collectives (GEMMs, memory-bound kernels, copies); the "
        "input copy's bytes; the memory-usage activation blocks",
        "not_scaled": "the gradient all-reduce (model-sized), model and optimizer state, the pinned "
        "staging buffer, model FLOPs",
        "injections": list(getattr(job.get("injections", ()), "specs", job.get("injections", ()))),
    }
    (out / TRUTH_FILE).write_text(json.dumps(truth, indent=1) + "\n")
    return truth
