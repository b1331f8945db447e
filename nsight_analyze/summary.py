"""Per-rank / per-step time partition summary: the library behind `nsight-analyze summary`.

Why a library: the terminal command, the JSON output and the HTML report must show the same
numbers; they all call `summary()` and only render differently.

No pandas: the rows come from DuckDB's `fetchall` and the display tables (render/summary_tables.py)
are `PlainTable`s, so `nsight-analyze summary` in every format starts in a fraction of a second.
"""

from __future__ import annotations

from typing import Any

import duckdb

from .classify import UNCLASSIFIED_WARN_PCT, unclassified_note, unclassified_share
from .no_data import held_instead
from .partition import IDLE_PARTS, PARTS, TP_COLUMNS  # noqa: F401
from .render.data import records
from .render.table import PlainTable
from .sources.base import CORRUPT_TIMING

# The partition's columns have one source (partition.py); the names stay importable from here.
from .store.duck import has_relation, sql_string
from .store.query_layer import statements

SQL = statements("answers/summary")

TOP_KERNELS = 10
BY = ("rank", "step", "rank-step")


def _with_percentages(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for row in rows:
        window = row["window_ns"] or 0
        for col in TP_COLUMNS[1:]:
            row[col.replace("_ns", "_pct")] = round(100.0 * row[col] / window, 3) if window else None
    return rows


def partition(con: duckdb.DuckDBPyConnection, by: str = "rank") -> list[dict[str, Any]]:
    """time_partition rows: the whole capture per rank (by='rank'), one row per step (by='step')
    or one per rank and step (by='rank-step', the time_partition step rows as they are).

    by='step' sums each column over the ranks that have the step (rank-nanoseconds: a step's
    percentages are GPU-time shares across the job; divided by `ranks` they are the mean rank's
    times) and adds the job's step time: `job_step_ns` is the longest window over the ranks, that
    of `slowest_rank` (the lowest such rank on ties), which holds the others back at the step's
    end; `min_window_ns` is the shortest.
    """
    if by == "rank":
        cur = con.execute(SQL.sql("partition_by_rank", columns=", ".join(TP_COLUMNS)))
    elif by == "step":
        sums = ", ".join(SQL.sql("column_sum", column=c) for c in TP_COLUMNS)
        cur = con.execute(SQL.sql("partition_by_step", sums=sums))
    elif by == "rank-step":
        cur = con.execute(SQL.sql("partition_by_rank_step", columns=", ".join(TP_COLUMNS)))
    else:
        raise ValueError(f"by must be one of {', '.join(BY)}, not {by!r}")
    return _with_percentages(records(PlainTable.from_cursor(cur)))


def top_kernels(con: duckdb.DuckDBPyConnection, limit: int = TOP_KERNELS) -> list[dict[str, Any]]:
    """The kernels with the most summed GPU time over all ranks (kernel_summary when present)."""
    totals = SQL["kernel_totals_from_summary" if has_relation(con, "kernel_summary") else "kernel_totals"]
    cur = con.execute(SQL.sql("top_kernels", totals=totals, limit=int(limit)))
    return records(PlainTable.from_cursor(cur))


def _mark_one_time(con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]]) -> None:
    """Per-step rows get `one_time`: the step holds one-time work on some rank (job_steps)."""
    if not rows or "step" not in rows[0]:
        return
    flags = dict(con.execute(SQL["one_time_steps"]).fetchall()) if has_relation(con, "job_steps") else {}
    for row in rows:
        row["one_time"] = bool(flags.get(row["step"], False))


def step_stats(con: duckdb.DuckDBPyConnection) -> dict[str, Any] | None:
    """The job step time over the steps (docs/metrics.md "Steps"), None without steps.

    A step's job step time is its longest window over the ranks (the slowest rank's). Steps that
    hold one-time work (a torch.compile compilation, a CUDA/HIP graph capture) are start-up cost,
    not the steady state: `mean_step_ns`, `median_step_ns`, `min_step_ns` and `max_step_ns` are
    over the steady steps (queries/steps/job_steps.sql, the one definition), and `one_time_steps` lists
    the others. When every step holds one-time work they are over all steps (`steady_steps` = 0
    says so)."""
    if not has_relation(con, "job_steps"):
        return None
    rows = con.execute(SQL["job_step_times"]).fetchall()
    if not rows:
        return None
    over = [ns for _, ns, _, steady in rows if steady]
    ordered = sorted(over)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return {
        "steps": len(rows),
        "steady_steps": sum(1 for _, _, once, _ in rows if not once),
        "one_time_steps": [step for step, _, once, _ in rows if once],
        "mean_step_ns": sum(over) / len(over),
        "median_step_ns": median,
        "min_step_ns": min(over),
        "max_step_ns": max(over),
    }


def step_notes(stats: dict[str, Any] | None) -> list[str]:
    """The note that steps holding one-time work are left out of the mean and median step."""
    if not stats or not stats["one_time_steps"]:
        return []
    steps = ", ".join(str(s) for s in stats["one_time_steps"])
    plural = "s" if len(stats["one_time_steps"]) > 1 else ""
    if not stats["steady_steps"]:
        return [
            f"every step holds one-time work (torch.compile compilation or graph capture: steps {steps}); "
            "the mean and median step include them: there is no steady-state step to show"
        ]
    return [
        f"step{plural} {steps} hold{'' if plural else 's'} one-time work (torch.compile compilation or "
        f"CUDA/HIP graph capture): left out of the mean and median step ({stats['steady_steps']} steady "
        f"steps); listed with one_time = true"
    ]


def step_sources(con: duckdb.DuckDBPyConnection) -> dict[int, str]:
    """How each rank's steps were found: nvtx | detected | periodic | graph replay | annotation |
    capture (queries/steps/steps.sql), every source of its steps, comma-separated, when they differ (a
    periodic rank some of whose steps were merged at a graph replay: 'graph replay, periodic')."""
    return dict(con.execute(SQL["step_sources"]).fetchall())


# The ingest's corrupt-timing warnings of the files of the ranks shown (rules/corrupt_timing.py
# reads it too).
CORRUPT_TIMING_SQL = SQL.sql("corrupt_timing_warnings", prefix=sql_string(CORRUPT_TIMING))


def timing_warnings(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The file warnings that the trace's times are corrupt for some rows, as `path: warning`:
    they change the partition, so it is not shown without them."""
    rows = con.execute(SQL.sql("timing_warning_lines", corrupt_timing=CORRUPT_TIMING_SQL)).fetchall()
    return [text for (text,) in rows]


def coverage_notes(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The note that more than UNCLASSIFIED_WARN_PCT % of kernel time is in category 'other'
    (no kernel rule matched): the partition's compute and memory columns are the rules'
    verdicts, so with that much time in neither, its compute/memory split is uncertain."""
    share = unclassified_share(con)
    if share is None or share[0] <= UNCLASSIFIED_WARN_PCT:
        return []
    return [unclassified_note(*share)]


def summary(con: duckdb.DuckDBPyConnection, by: str = "rank") -> dict[str, Any]:
    """Everything `nsight-analyze summary` shows, as plain data (JSON-ready), from stored results.
    `no_timeline`: when the workspace has no timeline (no partition row by rank), what it holds
    instead (counters without a timeline, and which commands read them), else None. `warnings`:
    the files' corrupt-timing warnings (timing_warnings). `notes`: caveats on reading the
    partition (coverage_notes: too much kernel time unclassified; step_notes: steps of one-time
    work left out of the mean step). `step_stats`: the job step time over the steady steps
    (step_stats), None without steps; per-step rows carry `one_time`."""
    rows = partition(con, by)
    _mark_one_time(con, rows)
    stats = step_stats(con) if rows else None
    return {
        "by": by,
        "partition": rows,
        "step_source": step_sources(con),
        "step_stats": stats,
        "top_kernels": top_kernels(con),
        "no_timeline": None if rows or by != "rank" else held_instead(con) or None,
        "warnings": timing_warnings(con),
        "notes": (coverage_notes(con) + step_notes(stats)) if rows else [],
    }
