"""Many runs of one workspace: one row per run (job), its labels and headline numbers, and the
scaling efficiency of a series against a baseline run with where the loss goes.

Why: a performance engineer scales a job from 8 to 64 GPUs, sweeps the batch size or the
parallel layout, and asks which run is best and why efficiency fell; `compare` answers for two
runs. Each run is a job of the workspace (queries/job/merge_jobs.sql); its labels are the user's
(run.toml / run.json, `ingest --label`: run_labels.py) and what the traces carry (world size,
GPU, ranks, capture time). Every metric is one SQL aggregate over all jobs of the stored tables
(time_partition, jobs, ranks, merge_straggler_verdict; the statements: queries/runs/runs.sql), so
100 runs answer as fast as one; the scaling arithmetic runs on those few rows. Definitions:
docs/runs.md.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import duckdb

from ..errors import UserError
from ..run_labels import label_number, same_label
from ..store.duck import plain_rows
from ..store.query_layer import statements
from .scaling import DOMINANT_SHARE, scaling_series
from .select import history, mark_best, sweep_metric

# Labels the traces carry (source 'trace'); a user label of the same key wins, with a note.
TRACE_KEYS = ("ranks", "world_size", "gpu", "captured")
# Throughput labels: samples per step (`samples_per_step`, or its synonym `global_batch`) and
# tokens per step of the whole job; each x steps/s (median step) is a column, unknown otherwise.
THROUGHPUT = (("samples_per_s", ("samples_per_step", "global_batch")), ("tokens_per_s", ("tokens_per_step",)))
# beyond the first answers; --findings: diagnose's too
READS = ("comm_groups", "kernel_summary", "memory_peak")
GIB = 1 << 30

SQL = statements("runs/runs")


@dataclass
class RunsResult:
    """What `runs` shows: one row per run (`rows`), the scaling series (None unless asked for or
    labelled), the grouping label, and notes (one line each) on what could not be said."""

    rows: list[dict[str, Any]]
    scaling: dict[str, Any] | None = None
    by: str | None = None
    notes: list[str] = field(default_factory=list)
    over: str | None = None
    metric: str | None = None


def common_labels(result: RunsResult) -> dict[str, Any]:
    """The user labels every run shown has with the same value (of two runs or more): a table
    says them once, above it, and shows each run's other labels (the ones that vary)."""
    if len(result.rows) < 2:
        return {}
    first, *others = (r["user_labels"] for r in result.rows)
    return {k: v for k, v in first.items() if k != "name" and all(k in o and o[k] == v for o in others)}


def parse_pairs(specs: tuple[str, ...] | list[str], option: str) -> dict[str, str]:
    """`--where key=value` options as {key: value} (keys lower case, as stored)."""
    out: dict[str, str] = {}
    for spec in specs:
        key, sep, value = spec.partition("=")
        if not sep or not key.strip():
            raise UserError(f"{option} {spec!r}: give key=value (e.g. {option} batch=32)")
        out[key.strip().lower()] = value.strip()
    return out


def _labels(con: duckdb.DuckDBPyConnection, notes: list[str]) -> dict[int, dict[str, tuple[str, str]]]:
    """{job: {key: (value, source)}} of the user's labels; a key whose files disagree inside one
    job (files of two labelled runs taken as one job) is left out, with a note."""
    try:
        _, rows, _ = plain_rows(con, SQL["run_label_values"])
    except duckdb.CatalogException:  # a workspace made before run labels: none
        return {}
    out: dict[int, dict[str, tuple[str, str]]] = {}
    for job, key, vals, sources in rows:
        if len(vals) > 1:
            notes.append(
                f"run {job}: its files disagree on label {key} ({', '.join(vals)}): left out "
                "(are two runs taken as one job? see `nsight-analyze info`)"
            )
            continue
        out.setdefault(int(job), {})[key] = (vals[0], ", ".join(sources))
    return out


def _captured(ns: Any) -> str | None:
    if ns is None:
        return None
    return datetime.fromtimestamp(int(ns) / 1e9, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _trace_labels(row: dict[str, Any]) -> dict[str, str]:
    """What the traces carry, as labels (source 'trace')."""
    out = {
        "ranks": str(row["ranks"]),
        "world_size": None if row["world_size"] is None else str(row["world_size"]),
        "gpu": row["gpu"],
        "captured": _captured(row["capture_start_utc_ns"]),
    }
    return {k: v for k, v in out.items() if v is not None}


def _mfu(con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]], notes: list[str]) -> None:
    """MFU where a run's label `model_flops_per_step` (model FLOPs of one step of the whole job)
    and every rank's dense peak are known: flops / (median step time x sum of the peaks); else
    unknown with the reason. HFU needs counted FLOPs, read per run on request (_hfu)."""
    for r in rows:
        r["mfu"] = None
        r["mfu_unknown"] = "no model_flops_per_step label"
        r["hfu"] = None
        r["hfu_unknown"] = "counted FLOPs are read per run on request: `nsight-analyze runs --hfu`"
    wanted = [r for r in rows if "model_flops_per_step" in r["labels"]]
    if not wanted:
        return
    from ..gpus import rank_peak_rows

    peaks = rank_peak_rows(con)
    job_of = dict(con.execute("SELECT rank, job FROM ranks").fetchall())
    total: dict[int, float] = {}
    unknown: dict[int, str] = {}
    for p in peaks:
        job = job_of.get(p["rank"])
        if p.get("peak_flops") is None:
            unknown.setdefault(job, f"rank {p['rank']}: GPU peak unknown ({p.get('reason') or 'see `gpus`'})")
        else:
            total[job] = total.get(job, 0.0) + float(p["peak_flops"])
    for r in wanted:
        flops = label_number(r["labels"]["model_flops_per_step"])
        if flops is None or flops <= 0:
            r["mfu_unknown"] = f"model_flops_per_step={r['labels']['model_flops_per_step']} is not a number"
        elif r["step_median_ns"] is None:
            r["mfu_unknown"] = "no steps"
        elif r["complete"] is False:  # the job's FLOPs against the peaks of the ranks present
            r["mfu_unknown"] = f"only {r['ranks_label']} captured"
        elif r["job"] in unknown or not total.get(r["job"]):
            r["mfu_unknown"] = unknown.get(r["job"], "GPU peak unknown")
        else:
            r["mfu"] = flops / (r["step_median_ns"] * 1e-9 * total[r["job"]])
            r["mfu_unknown"] = None


def _throughput(rows: list[dict[str, Any]], notes: list[str]) -> None:
    """samples_per_s and tokens_per_s: the run's label (samples_per_step or global_batch; tokens_per_step)
    x steps/s of the median job step; unknown (None, the reason in `*_unknown`) without the label
    or steps, or when samples_per_step and global_batch disagree."""
    for r in rows:
        for column, keys in THROUGHPUT:
            r[column], why = None, f"no {' or '.join(keys)} label"
            given = {k: r["user_labels"][k] for k in keys if k in r["user_labels"]}
            values = {k: label_number(v) for k, v in given.items()}
            if any(v is None or v <= 0 for v in values.values()):
                why = ", ".join(f"{k}={given[k]}" for k, v in values.items() if v is None or v <= 0)
                why += " is not a positive number"
            elif len(set(values.values())) > 1:
                why = " and ".join(f"{k}={given[k]}" for k in given) + " disagree"
                notes.append(f"run {r['job']}: {why}: {column} unknown")
            elif values and r["step_median_ns"]:
                r[column], why = next(iter(values.values())) * 1e9 / r["step_median_ns"], None
            elif values:
                why = "no steps present on all its ranks"
            r[f"{column}_unknown"] = why


def _memory(con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]], notes: list[str]) -> None:
    """Each run's device-memory peak (`memory_peak_bytes`, `memory_peak_gib`: the largest peak
    bytes in use over its ranks, and `memory_peak_rank`): whether a larger batch would fit is a
    sweep's other question. Unknown (None, never 0; the reason in `memory_peak_unknown`) when
    the run's traces hold no device-memory events; a run with them on only some ranks says so."""
    try:
        _, data, _ = plain_rows(con, SQL["run_memory_peaks"])
    except duckdb.CatalogException:  # a workspace made before memory_peak: none
        data = []
    by_job = {int(job): (peak, rank, have) for job, peak, rank, have in data}
    for r in rows:
        peak, rank, have = by_job.get(int(r["job"]), (None, None, 0))
        r["memory_peak_bytes"] = None if peak is None else int(peak)
        r["memory_peak_gib"] = None if peak is None else peak / GIB
        r["memory_peak_rank"] = rank
        r["memory_peak_unknown"] = (
            "no device-memory events (nsys --cuda-memory-usage, or the PyTorch profiler's profile_memory)"
            if peak is None
            else None
        )
        if peak is not None and have < r["ranks"]:
            notes.append(
                f"run {r['job']}: device-memory events on {have} of its {r['ranks']} ranks: "
                "memory_peak is the largest of those"
            )


def _op_text(ops: str | None) -> str:
    """NCCL operation names as words: 'AllReduce,SendRecv' -> 'all-reduce, send/recv'."""
    words = {"SendRecv": "send/recv", "Send": "send", "Recv": "recv"}
    out = []
    for op in (ops or "").split(","):
        if op:
            out.append(words.get(op) or "-".join(w.lower() for w in re.findall(r"[A-Z][a-z]*|[a-z]+", op)))
    return ", ".join(dict.fromkeys(out)) or "collectives"


def _dimensions(con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]]) -> None:
    """Each run's communication per parallelism dimension (`comms_by_dimension`: comm_groups
    summed per run and dimension, per rank present) and the dimension holding at least
    DOMINANT_SHARE of its exposed collective time (`dominant_dimension`, else None)."""
    try:
        columns, data, _ = plain_rows(con, SQL["run_dimensions"])
    except duckdb.CatalogException:  # a workspace made before comm_groups: none
        data, columns = [], []
    by_job: dict[int, list[dict[str, Any]]] = {}
    for values in data:
        d = dict(zip(columns, values))
        by_job.setdefault(int(d.pop("job")), []).append(d)
    for r in rows:
        dims = by_job.get(int(r["job"]), [])
        r["comms_by_dimension"] = dims
        top = dims[0] if dims else None
        share = top["exposed_share"] if top else None
        r["dominant_dimension"] = (
            {"dimension": top["dimension"], "ops": _op_text(top["ops"]), "exposed_share": share}
            if share is not None and share >= DOMINANT_SHARE
            else None
        )


@contextlib.contextmanager
def _one_job(con: duckdb.DuckDBPyConnection, job: int) -> Iterator[None]:
    """The connection shows job `job` alone (job_scope, as `--job N`) until the block ends; then
    its scope (TEMP views) is undone, so the next job's reader sees the workspace's own results."""
    from ..store import job_scope

    def views() -> set[str]:
        return {v for (v,) in con.execute("SELECT view_name FROM duckdb_views() WHERE temporary").fetchall()}

    before = views()
    job_scope.scope(con, job)
    try:
        yield
    finally:
        for name in views() - before:
            con.execute(f'DROP VIEW temp.main."{name}"')
        # the results computed for this session, moved aside by the scope: back under their names
        for (name,) in con.execute(SQL["unscoped_tables"]).fetchall():
            con.execute(SQL.sql("restore_unscoped", name=name, original=name[len("_unscoped_") :]))


def _findings(con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]]) -> None:
    """The top finding of each run (diagnose on that job alone, as `diagnose --job N`): one
    diagnosis per run, so only on request (`--findings`)."""
    from ..diagnose import diagnose

    for r in rows:
        with _one_job(con, r["job"]):
            found = diagnose(con).findings
        r["top_finding"] = found[0].id if found else None


def _hfu(con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]]) -> None:
    """Each run's HFU (counted FLOPs: Nsight Compute counters on the timeline's kernels) as
    `mfu --job N` computes it (mfu.hfu_mfu_summary, the one definition), on that job alone: one
    MFU/HFU computation per run, so only on request (`--hfu`)."""
    from ..mfu import hfu_mfu_summary

    for r in rows:
        with _one_job(con, r["job"]):
            doc = hfu_mfu_summary(con, detail=False)
        r["hfu"] = doc["hfu"]
        r["hfu_unknown"] = (
            None
            if doc["hfu"] is not None
            else "no counted FLOPs (Nsight Compute counters) or GPU peak unknown: "
            f"`nsight-analyze mfu --job {r['job']}` says which"
        )


def runs(
    con: duckdb.DuckDBPyConnection,
    where: dict[str, str] | None = None,
    by: str | None = None,
    scaling: str | None = None,
    baseline: str | None = None,
    findings: bool = False,
    series: bool = True,
    over: str | None = None,
    metric: str | None = None,
    hfu: bool = False,
) -> RunsResult:
    """Every run (job) of the workspace with its labels and numbers (docs/runs.md); `where`
    keeps the runs whose labels have those values, `by` sorts by a label (numerically when its
    values are numbers); `scaling` ('strong' | 'weak', else the runs' `scaling` label) adds the
    efficiency of each run against `baseline` (a run number or name) and where the loss goes
    (series=False: none, for `--compare` and the gate, which compare two runs of any labels);
    `over` ('time') orders the runs by date (`select.history`) and marks the best by
    `metric` (default: the median step time); a sweep (`by`) marks its best by `metric`
    (default: select.sweep_metric); `findings` and `hfu` add each run's top finding and HFU
    (one computation per run)."""
    notes: list[str] = []
    try:
        columns, data, _ = plain_rows(con, SQL["run_metrics"])
    except duckdb.CatalogException as exc:
        raise UserError(
            f"this workspace has no analysed runs ({str(exc).splitlines()[0]}); ingest traces first"
        ) from None
    labels = _labels(con, notes)
    rows: list[dict[str, Any]] = []
    for values in data:
        row = dict(zip(columns, values))
        job = int(row["job"])
        user = labels.get(job, {})
        trace = _trace_labels(row)
        merged = {**trace, **{k: v for k, (v, _) in user.items()}}
        for key in sorted(set(trace) & set(user)):
            if not same_label(trace[key], user[key][0]):
                notes.append(
                    f"run {job}: label {key}={user[key][0]} ({user[key][1]}) but the traces say {trace[key]}"
                )
        row["name"] = merged.get("name")
        row["labels"] = merged
        row["user_labels"] = {k: v for k, (v, _) in user.items()}
        row["steps_per_s"] = 1e9 / row["step_median_ns"] if row["step_median_ns"] else None
        row["top_finding"] = None
        rows.append(row)
    for key, value in (where or {}).items():
        rows = [r for r in rows if key in r["labels"] and same_label(r["labels"][key], value)]
    if by is not None:
        by = by.lower()
        have = [r for r in rows if by in r["labels"]]
        if not have:
            raise UserError(f"--by {by}: no run has label {by} (`nsight-analyze runs` lists the labels)")
        numeric = all(label_number(r["labels"][by]) is not None for r in have)
        key = (
            (lambda r: (label_number(r["labels"][by]), r["job"]))
            if numeric
            else (lambda r: (r["labels"][by], r["job"]))
        )
        missing = [r for r in rows if by not in r["labels"]]
        if missing:
            notes.append(
                f"--by {by}: runs {', '.join(str(r['job']) for r in missing)} have no label {by}; listed last"
            )
        rows = sorted(have, key=key) + missing
    _mfu(con, rows, notes)
    _throughput(rows, notes)
    _memory(con, rows, notes)
    _dimensions(con, rows)
    if over is not None:
        metric = metric or "step_median_ns"
        rows = history(rows, over, metric, notes)
    elif by is not None:
        metric = metric or sweep_metric(rows)
        mark_best(rows, metric, notes)
    else:
        metric = None
    if findings:
        _findings(con, rows)
    if hfu:
        _hfu(con, rows)
    scaled = scaling_series(rows, scaling, baseline, notes) if series else None
    return RunsResult(rows, scaled, by, notes, over=over, metric=metric)
