"""Choosing among runs: the best of a sweep or a history by a metric, a run named by number or
name, and the pair a CI gate compares (the newest run and the best earlier one of its labels).

Why a module of its own: `runs --by`, `--over time`, `--compare A B` and
`--fail-on-regression` each pick runs from the rows `runs.runs()` computed; the rules of "best"
and "newest" are one place (docs/runs.md).
"""

from __future__ import annotations

from typing import Any

from ..errors import UserError
from ..run_labels import same_label

# `--over time`, `--by KEY` and the CI gate: which way is better for each metric a run has.
HIGHER_IS_BETTER = {"steps_per_s", "samples_per_s", "tokens_per_s", "mfu", "overlap", "compute_share"}
LOWER_IS_BETTER = {
    "step_median_ns", "step_p95_ns", "step_mean_ns", "exposed_comms_share", "idle_share", "memory_share",
    "memory_kernels_share", "copies_share",
    "straggler_delay_ns", "straggler_cost_ns",
}  # fmt: skip


def sweep_metric(rows: list[dict[str, Any]]) -> str:
    """The metric a sweep's best run is by when none is given: the work rate the labels allow
    (samples/s, else tokens/s: a larger batch takes longer per step and may still be the best),
    else the median step time."""
    for metric in ("samples_per_s", "tokens_per_s"):
        if rows and all(r.get(metric) is not None for r in rows):
            return metric
    return "step_median_ns"


def mark_best(rows: list[dict[str, Any]], metric: str, notes: list[str]) -> None:
    """`best` marks the run of the best `metric` (lowest step time, highest throughput or MFU:
    HIGHER_IS_BETTER / LOWER_IS_BETTER); runs without the metric are never best."""
    if metric not in HIGHER_IS_BETTER | LOWER_IS_BETTER:
        choices = ", ".join(sorted(HIGHER_IS_BETTER | LOWER_IS_BETTER))
        raise UserError(f"--metric {metric}: choose one of {choices}")
    have = [r for r in rows if r.get(metric) is not None]
    sign = -1.0 if metric in HIGHER_IS_BETTER else 1.0
    best = min(have, key=lambda r: (sign * r[metric], r["job"])) if have else None
    for r in rows:
        r["best"] = r is best
    if not have:
        notes.append(f"--metric {metric}: no run has it: no best run")


def history(rows: list[dict[str, Any]], over: str, metric: str, notes: list[str]) -> list[dict[str, Any]]:
    """The runs in time order (`date` label when every run has one, else capture start, else
    run number, with a note), the best by `metric` marked (mark_best)."""
    if over != "time":
        raise UserError(f"--over {over}: only 'time' (a metric against the runs' date or capture time)")
    if rows and all("date" in r["user_labels"] for r in rows):
        key = lambda r: (str(r["user_labels"]["date"]), r["job"])  # noqa: E731
        for r in rows:
            r["when"] = str(r["user_labels"]["date"])
    else:
        key = newest_key(rows, notes) if rows else (lambda r: r["job"])
        for r in rows:
            r["when"] = r["labels"].get("captured")
    ordered = sorted(rows, key=key)
    mark_best(ordered, metric, notes)
    return ordered


IDENTITY_KEYS = ("name", "date", "captured")


def find_run(rows: list[dict[str, Any]], ref: str, option: str) -> dict[str, Any]:
    """The run `ref` names: its number, else its name label; a name two runs share or a run that
    is not there is one clear line."""
    by_number = [r for r in rows if str(r["job"]) == ref.strip()]
    if by_number:
        return by_number[0]
    named = [r for r in rows if r["name"] == ref]
    if len(named) > 1:
        raise UserError(
            f"{option} {ref}: runs {', '.join(str(r['job']) for r in named)} share that name; give a number"
        )
    if not named:
        raise UserError(
            f"{option} {ref}: no such run (a run number or name; `nsight-analyze runs` lists them)"
        )
    return named[0]


def newest_key(rows: list[dict[str, Any]], notes: list[str]):
    """How runs are ordered in time: capture start when every run has one, else the `date`
    label when every run has one, else the run number (ingest order), said in a note."""
    if all(r["capture_start_utc_ns"] is not None for r in rows):
        return lambda r: (r["capture_start_utc_ns"], r["job"])
    if all("date" in r["user_labels"] for r in rows):
        return lambda r: (str(r["user_labels"]["date"]), r["job"])
    notes.append("some runs have no capture time nor date label: the newest is the highest run number")
    return lambda r: (r["job"],)


def regression_pair(
    rows: list[dict[str, Any]], notes: list[str]
) -> tuple[dict[str, Any], dict[str, Any] | None, str]:
    """(newest run, best earlier run of the same labels or None, why none): the pair a CI gate
    compares. Same labels: every label but name, date and capture time equal (GPU, ranks, world
    size and the user's batch, tp, ... included). Best: the lowest median step time."""
    if not rows:
        raise UserError("--fail-on-regression: no run (check --where)")
    key = newest_key(rows, notes)
    newest = max(rows, key=key)
    mine = {k: v for k, v in newest["labels"].items() if k not in IDENTITY_KEYS}

    def same(r: dict[str, Any]) -> bool:
        theirs = {k: v for k, v in r["labels"].items() if k not in IDENTITY_KEYS}
        return theirs.keys() == mine.keys() and all(same_label(theirs[k], mine[k]) for k in mine)

    peers = [r for r in rows if r is not newest and same(r)]
    if not peers:
        return newest, None, "no earlier run has the same labels"
    timed = [r for r in peers if r["step_median_ns"] is not None]
    if not timed:
        return newest, None, "no earlier run of the same labels has steps"
    return newest, min(timed, key=lambda r: (r["step_median_ns"], r["job"])), ""
