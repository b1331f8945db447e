"""Scaling efficiency of a series of runs against a baseline run, and where the loss goes.

Why a module of its own: the arithmetic of a scaling series (ideal step time, efficiency, the
loss split into compute, exposed communication, imbalance and idle) runs on the few rows
`runs.runs()` computed in SQL, one per run; docs/runs.md "Scaling efficiency" defines it.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import UserError
from ..run_labels import label_number, same_label
from .select import find_run

# The step time above ideal, split into these parts (docs/runs.md "Where the loss goes").
LOSS_PARTS = ("compute", "exposed_comms", "imbalance", "idle")
IDLE_CAUSES = ("launch_gap", "input_stall", "sync_stall", "host_bound", "idle_other")
SCALING_MODES = ("strong", "weak")
# A dimension named in the scaling line when it holds at least this share of the run's exposed
# collective time (comm_groups).
DOMINANT_SHARE = 0.8


def scaling_mode(rows: list[dict[str, Any]], scaling: str | None) -> str | None:
    """The scaling mode: given, else the runs' `scaling` label when they agree; None: no series
    (runs without such labels are never called a scaling series)."""
    if scaling is not None:
        if scaling not in SCALING_MODES:
            raise UserError(f"--scaling {scaling}: choose strong or weak")
        return scaling
    said = {r["user_labels"].get("scaling") for r in rows} - {None}
    if not said:
        return None
    if len(said) > 1:
        raise UserError(
            f"the runs' scaling labels disagree ({', '.join(sorted(said))}): select one series with "
            "--where scaling=..., or say --scaling strong|weak"
        )
    mode = said.pop().lower()
    if mode not in SCALING_MODES:
        raise UserError(f"label scaling={mode}: say strong or weak")
    return mode


def gpus_of(r: dict[str, Any]) -> tuple[int | None, str | None]:
    """(N, why unknown): the run's GPU count: a `world_size` label (user's, else the trace's),
    else the ranks present when there are several."""
    if r["complete"] is False:
        return None, f"only {r['ranks_label']} captured"
    size = label_number(r["labels"].get("world_size"))
    if size is not None and size >= 1 and size == int(size):
        return int(size), None
    if r["ranks"] > 1:
        return int(r["ranks"]), None
    return None, "one rank captured and no world size (label world_size=N, or the trace's distributedInfo)"


def scaling_series(
    rows: list[dict[str, Any]], scaling: str | None, baseline: str | None, notes: list[str]
) -> dict[str, Any] | None:
    """Efficiency of each run against the baseline and the split of its loss (docs/runs.md)."""
    mode = scaling_mode(rows, scaling)
    if mode is None:
        if baseline is not None:
            raise UserError("--baseline needs --scaling strong|weak (or runs labelled scaling=...)")
        return None
    if not rows:
        raise UserError("no run to scale (check --where)")
    if baseline is not None:
        base = find_run(rows, baseline, "--baseline")
    else:  # the smallest run (fewest GPUs), then the first
        base = min(rows, key=lambda r: (gpus_of(r)[0] or math.inf, r["job"]))
    n_base, why_base = gpus_of(base)
    if why_base is None and not base["steps"]:
        why_base = "no steps present on all its ranks"
    if len(rows) == 1:
        notes.append("one run: a scaling series needs at least two")
    out_runs = []
    for r in rows:
        n, why = gpus_of(r)
        if why_base is not None:
            why = f"baseline run {base['job']}: {why_base}"
        elif why is None and not r["steps"]:
            why = "no steps present on all its ranks"
        elif why is None:
            for key in ("model",):
                a, b = r["user_labels"].get(key), base["user_labels"].get(key)
                if a is not None and b is not None and not same_label(a, b):
                    why = f"{key} {a}, the baseline's is {b}: not one series"
            if why is None and r["gpu"] != base["gpu"]:  # a GPU one trace names and the other does not too
                mine, theirs = r["gpu"] or "unknown", base["gpu"] or "unknown"
                why = f"GPU {mine}, the baseline's is {theirs}: not one series"
        entry: dict[str, Any] = {
            "job": r["job"],
            "name": r["name"],
            "gpus": n,
            "baseline": r is base,
            "exposed_comms_dimension": r.get("dominant_dimension"),
        }
        if why is not None:
            entry.update(efficiency=None, unknown=why)
            out_runs.append(entry)
            continue
        scale = n_base / n if mode == "strong" else 1.0
        t, t_base = r["step_mean_ns"], base["step_mean_ns"]
        ideal = t_base * scale
        loss = t - ideal
        parts = {p: r[f"{p}_step_ns"] - base[f"{p}_step_ns"] * scale for p in LOSS_PARTS}
        idle = {c: r[f"{c}_step_ns"] - base[f"{c}_step_ns"] * scale for c in IDLE_CAUSES}
        entry.update(
            efficiency=ideal / t if t else None,
            unknown=None,
            step_ns=t,
            ideal_step_ns=ideal,
            loss_ns=loss,
            loss={
                p: {
                    "ns": v,
                    "points": 100.0 * v / t if t else None,
                    "share": v / loss if abs(loss) > 0 else None,
                }
                for p, v in parts.items()
            },
            idle_by_cause_ns=idle,
        )
        out_runs.append(entry)
    return {
        "mode": mode,
        "baseline": base["job"],
        "definition": "strong: T_base*N_base/(T*N); weak: T_base/T; T = mean job step time over the steps "
        "every rank has, N = GPUs (world size); loss = T - ideal, split by docs/runs.md",
        "runs": out_runs,
    }


def scaling_line(entry: dict[str, Any]) -> str:
    """One line per run of a series: 'run 3, 32 GPUs: efficiency 71.0 %; of the 29.0 points lost:
    15.0 points exposed all-reduce on the dp group (5.10 ms), ...' (the largest parts first; the
    dimension named when one holds DOMINANT_SHARE of the run's exposed collective time)."""
    head = f"run {entry['job']}" + (f" ({entry['name']})" if entry["name"] else "")
    if entry["efficiency"] is None:
        return f"{head}: efficiency unknown: {entry['unknown']}"
    gpus = f"{entry['gpus']} GPU" + ("" if entry["gpus"] == 1 else "s")
    text = f"{head}, {gpus}: efficiency {100 * entry['efficiency']:.1f} %"
    if entry["baseline"]:
        return text + " (baseline)"
    parts = sorted(entry["loss"].items(), key=lambda kv: -abs(kv[1]["ns"]))
    dim = entry.get("exposed_comms_dimension")

    def what(part: str) -> str:
        if part == "exposed_comms" and dim is not None:  # one dimension holds most exposed time
            if dim["dimension"] == "unknown":  # never name a group the traces do not identify
                return f"exposed {dim['ops']} (dimension unknown: `nsight-analyze comms`)"
            return f"exposed {dim['ops']} on the {dim['dimension']} group"
        return part.replace("_", " ")

    said = ", ".join(
        f"{v['points']:.1f} points {what(p)} ({v['ns'] / 1e6:.2f} ms)"
        for p, v in parts
        if v["points"] is not None and abs(v["points"]) >= 0.05  # what rounds to 0.0 says nothing
    )
    return f"{text}; of the {100 - 100 * entry['efficiency']:.1f} points lost: {said}"


# Labels that name or date a run rather than say what it ran: ignored when `--fail-on-regression`
# looks for the runs "of the same labels".
