"""Many runs of one workspace: one row per run (job), its labels and headline numbers, and the
scaling efficiency of a series against a baseline run with where the loss goes.

Why: a performance engineer scales a job from 8 to 64 GPUs, sweeps the batch size or the
parallel layout, and asks which run is best and why efficiency fell; `compare` answers for two
runs. Each run is a job of the workspace (queries/job/merge_jobs.sql); its labels are the user's
(run.toml / run.json, `ingest --label`: run_labels.py) and what the traces carry (world size,
GPU, ranks, capture time). Every metric is one SQL aggregate over all jobs of the stored tables
(time_partition, jobs, ranks, merge_straggler_verdict), so 100 runs answer as fast as one; the
scaling arithmetic runs on those few rows. Definitions: docs/runs.md.
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

# One row per job: the step statistics over the steps every rank of the job has, and the
# partition shares (over those steps, else the whole capture). A step's job step time is its
# longest window over the ranks (docs/metrics.md "Job step time"); the loss parts are means over
# the ranks per step (ns), then means over the steps, and tile the mean job step time exactly:
#   step = busy + exposed_comms + imbalance + idle, with
#   busy = compute + memory + other, imbalance = (step - mean window) + w,
#   exposed_comms = exposed - w, w = min(exposed, max compute - mean compute): the wait the
#   faster ranks spend in collectives for the slowest rank's compute (queries/job/imbalance.sql).
_METRICS_SQL = """
WITH rj AS (SELECT rank, job FROM ranks WHERE job IS NOT NULL),
nr AS (SELECT job, count(*) AS n FROM rj GROUP BY job),
tp AS (SELECT rj.job, t.* FROM time_partition AS t JOIN rj USING (rank)),
st AS (
    SELECT job, step, count(*) AS have,
           max(window_ns) AS step_ns, avg(window_ns) AS mean_window_ns,
           avg(compute_ns + memory_ns + other_ns) AS busy_ns,
           avg(comms_exposed_ns) AS exposed_ns, avg(idle_ns) AS idle_ns,
           least(avg(comms_exposed_ns), max(compute_ns) - avg(compute_ns)) AS wait_ns,
           avg(launch_gap_ns) AS launch_gap_ns, avg(input_stall_ns) AS input_stall_ns,
           avg(sync_stall_ns) AS sync_stall_ns, avg(host_bound_ns) AS host_bound_ns,
           avg(idle_other_ns) AS idle_other_ns,
           sum(window_ns) AS w, sum(compute_ns) AS c, sum(memory_ns) AS m, sum(other_ns) AS o,
           sum(comms_exposed_ns) AS e, sum(idle_ns) AS i, sum(comms_total_ns) AS ct,
           sum(comms_hidden_ns) AS ch, sum(memory_kernels_ns) AS mk, sum(copies_ns) AS cp
    FROM tp WHERE step IS NOT NULL GROUP BY job, step
),
-- the steady steps of the run (queries/steps/job_steps.sql) that every rank of it has
full_steps AS (
    SELECT st.* FROM st JOIN nr USING (job) LEFT JOIN job_steps AS j USING (job, step)
    WHERE st.have = nr.n AND coalesce(j.steady, true)
),
per_step AS (
    SELECT job, count(*) AS steps,
           median(step_ns) AS step_median_ns, quantile_cont(step_ns, 0.95) AS step_p95_ns,
           avg(step_ns) AS step_mean_ns,
           avg(busy_ns) AS compute_step_ns, avg(exposed_ns - wait_ns) AS exposed_comms_step_ns,
           avg(step_ns - mean_window_ns + wait_ns) AS imbalance_step_ns, avg(idle_ns) AS idle_step_ns,
           avg(launch_gap_ns) AS launch_gap_step_ns, avg(input_stall_ns) AS input_stall_step_ns,
           avg(sync_stall_ns) AS sync_stall_step_ns, avg(host_bound_ns) AS host_bound_step_ns,
           avg(idle_other_ns) AS idle_other_step_ns,
           sum(w) AS w, sum(c) AS c, sum(m) AS m, sum(o) AS o, sum(e) AS e, sum(i) AS i,
           sum(ct) AS ct, sum(ch) AS ch, sum(mk) AS mk, sum(cp) AS cp
    FROM full_steps GROUP BY job
),
whole AS (
    SELECT job, sum(window_ns) AS w, sum(compute_ns) AS c, sum(memory_ns) AS m, sum(other_ns) AS o,
           sum(comms_exposed_ns) AS e, sum(idle_ns) AS i, sum(comms_total_ns) AS ct,
           sum(comms_hidden_ns) AS ch, sum(memory_kernels_ns) AS mk, sum(copies_ns) AS cp
    FROM tp WHERE step IS NULL GROUP BY job
),
shares AS (
    SELECT coalesce(p.job, h.job) AS job,
           CASE WHEN p.job IS NOT NULL THEN 'steps' ELSE 'capture' END AS shares_over,
           coalesce(p.w, h.w) AS w, coalesce(p.c, h.c) AS c, coalesce(p.m, h.m) AS m,
           coalesce(p.o, h.o) AS o, coalesce(p.e, h.e) AS e, coalesce(p.i, h.i) AS i,
           coalesce(p.ct, h.ct) AS ct, coalesce(p.ch, h.ch) AS ch,
           CASE WHEN p.job IS NOT NULL THEN p.mk ELSE h.mk END AS mk,
           CASE WHEN p.job IS NOT NULL THEN p.cp ELSE h.cp END AS cp
    FROM (SELECT * FROM per_step WHERE steps > 0) AS p FULL JOIN whole AS h ON h.job = p.job
),
gpu AS (
    SELECT job, string_agg(DISTINCT regexp_replace(gpu_name, '^NVIDIA ', ''), ', ' ORDER BY
               regexp_replace(gpu_name, '^NVIDIA ', '')) AS gpu
    FROM ranks WHERE job IS NOT NULL AND gpu_name IS NOT NULL AND gpu_name <> '' GROUP BY job
)
SELECT j.job, j.ranks, j.world_size, j.complete, j.label AS ranks_label, j.capture_start_utc_ns,
       g.gpu, coalesce(p.steps, 0) AS steps, p.step_median_ns, p.step_p95_ns, p.step_mean_ns,
       p.compute_step_ns, p.exposed_comms_step_ns, p.imbalance_step_ns, p.idle_step_ns,
       p.launch_gap_step_ns, p.input_stall_step_ns, p.sync_stall_step_ns, p.host_bound_step_ns,
       p.idle_other_step_ns,
       s.shares_over,
       s.c / nullif(s.w, 0) AS compute_share, s.m / nullif(s.w, 0) AS memory_share,
       s.mk / nullif(s.w, 0) AS memory_kernels_share, s.cp / nullif(s.w, 0) AS copies_share,
       s.o / nullif(s.w, 0) AS other_share, s.e / nullif(s.w, 0) AS exposed_comms_share,
       s.i / nullif(s.w, 0) AS idle_share,
       CASE WHEN s.ct > 0 THEN s.ch / s.ct END AS overlap,
       v.verdict AS straggler_verdict, v.straggler_rank, v.straggler_delay_ns, v.straggler_cost_ns
FROM jobs AS j
LEFT JOIN per_step AS p ON p.job = j.job
LEFT JOIN shares AS s ON s.job = j.job
LEFT JOIN gpu AS g ON g.job = j.job
LEFT JOIN merge_straggler_verdict AS v ON v.job = j.job
ORDER BY j.job
"""

# Per run and parallelism dimension (comm_groups: queries/comms/comm_groups.sql): its collective time
# and exposed time (sums over the run's ranks and the whole capture) per rank present, its share
# of the run's exposed collective time, and the bus bandwidth (time-weighted over the
# communicators that have one; unknown without payload sizes). Which collectives: `ops`.
_DIMENSIONS_SQL = """
WITH nr AS (SELECT job, count(*) AS n FROM ranks WHERE job IS NOT NULL GROUP BY job),
o AS (
    SELECT job, dimension, string_agg(DISTINCT op, ',' ORDER BY op) AS ops
    FROM comm_groups, unnest(string_split(ops, ',')) AS u(op) GROUP BY job, dimension
),
d AS (
    SELECT job, dimension, count(DISTINCT group_key) AS communicators, sum(total_ns) AS total_ns,
           sum(exposed_ns) AS exposed_ns,
           sum(busbw_gbps * total_ns) FILTER (WHERE busbw_gbps IS NOT NULL)
               / nullif(sum(total_ns) FILTER (WHERE busbw_gbps IS NOT NULL), 0) AS busbw_gbps,
           CASE WHEN count(DISTINCT link) = 1 THEN min(link) ELSE 'mixed' END AS link
    FROM comm_groups GROUP BY job, dimension
)
SELECT d.job, d.dimension, o.ops, d.communicators, d.link,
       d.total_ns / nr.n AS total_per_rank_ns, d.exposed_ns / nr.n AS exposed_per_rank_ns,
       d.exposed_ns / nullif(sum(d.exposed_ns) OVER (PARTITION BY d.job), 0) AS exposed_share,
       d.busbw_gbps
FROM d JOIN nr USING (job) JOIN o USING (job, dimension)
ORDER BY d.job, d.exposed_ns DESC, d.dimension
"""

# Per run: the device-memory peak (memory_peak: one row per rank, device and source of the
# memory_usage rows, queries/partition/memory_peak.sql) as its largest over the run's ranks, the
# rank that holds it (the lowest of equal ones), and how many of the run's ranks have any.
_MEMORY_SQL = """
SELECT r.job, max(m.peak_bytes_in_use) AS peak_bytes,
       arg_max(m.rank, (m.peak_bytes_in_use, -m.rank)) AS peak_rank,
       count(DISTINCT m.rank) AS ranks_with
FROM memory_peak AS m JOIN ranks AS r USING (rank)
WHERE r.job IS NOT NULL AND m.peak_bytes_in_use IS NOT NULL
GROUP BY r.job ORDER BY r.job
"""

_LABELS_SQL = """
SELECT r.job, l.key, list(DISTINCT l.value ORDER BY l.value) AS vals,
       list(DISTINCT l.source ORDER BY l.source) AS sources
FROM run_labels AS l JOIN (SELECT DISTINCT file_id, job FROM ranks WHERE job IS NOT NULL) AS r
  ON r.file_id = l.file_id
GROUP BY r.job, l.key ORDER BY r.job, l.key
"""


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
        _, rows, _ = plain_rows(con, _LABELS_SQL)
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
        _, data, _ = plain_rows(con, _MEMORY_SQL)
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
        columns, data, _ = plain_rows(con, _DIMENSIONS_SQL)
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
        moved = (
            "SELECT table_name FROM duckdb_tables() WHERE temporary AND starts_with(table_name, '_unscoped_')"
        )
        for (name,) in con.execute(moved).fetchall():  # computed for this session: back under their names
            con.execute(f'ALTER TABLE temp.main."{name}" RENAME TO "{name[len("_unscoped_") :]}"')


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
        columns, data, _ = plain_rows(con, _METRICS_SQL)
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
