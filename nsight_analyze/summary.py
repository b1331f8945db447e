"""Per-rank / per-step time partition summary: the library behind `nsight-analyze summary`.

Why a library: the terminal command, the JSON output and the HTML report must show the same
numbers; they all call `summary()` and only render differently.

No pandas: the rows come from DuckDB's `fetchall` and the display tables are `PlainTable`s, so
`nsight-analyze summary` in every format starts in a fraction of a second.
"""

from __future__ import annotations

from typing import Any

import duckdb

from .classify import UNCLASSIFIED_WARN_PCT, unclassified_note, unclassified_share

# The partition's columns have one source (partition.py); the names stay importable from here.
from .duck import has_relation, sql_string
from .no_data import held_instead
from .partition import IDLE_PARTS, PARTS, TP_COLUMNS  # noqa: F401
from .render.data import records
from .render.escape import clean
from .render.table import PlainTable
from .render.terminal import echo, print_table
from .render.units import UNKNOWN, format_duration, format_pct
from .sources.base import CORRUPT_TIMING

TOP_KERNELS = 10
BY = ("rank", "step", "rank-step")

# (heading, time_partition column) in display order: the partition (parts tile the window), then
# the idle split and communication (a second table, so that each fits a terminal). Memory is shown
# as its two parts (they sum to memory_ns, which the JSON keeps): memory-bound kernels and copies
# (memcpy / memset), so that a memory share never reads as time spent copying.
DISPLAY = [
    ("compute", "compute_ns"),
    ("memory kernels", "memory_kernels_ns"),
    ("copies", "copies_ns"),
    ("other", "other_ns"),
    ("comms exposed", "comms_exposed_ns"),
    ("idle", "idle_ns"),
]
DISPLAY_IDLE = [  # idle (their sum) is in the first table
    ("launch gap", "launch_gap_ns"),
    ("input stall", "input_stall_ns"),
    ("sync stall", "sync_stall_ns"),
    ("host bound", "host_bound_ns"),
    ("idle other", "idle_other_ns"),
    ("comms total", "comms_total_ns"),
    ("comms hidden", "comms_hidden_ns"),
]


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
        cur = con.execute(
            f"SELECT rank, {', '.join(TP_COLUMNS)}, overlap_pct FROM time_partition "
            "WHERE step IS NULL ORDER BY rank"
        )
    elif by == "step":
        sums = ", ".join(f"sum({c})::BIGINT AS {c}" for c in TP_COLUMNS)
        cur = con.execute(
            f"SELECT step, count(*) AS ranks, {sums}, "
            "CASE WHEN sum(comms_total_ns) > 0 THEN 100.0 * sum(comms_hidden_ns) / sum(comms_total_ns) END "
            "AS overlap_pct, max(window_ns)::BIGINT AS job_step_ns, "
            "arg_max(rank, (window_ns, -rank)) AS slowest_rank, min(window_ns)::BIGINT AS min_window_ns "
            "FROM time_partition WHERE step IS NOT NULL GROUP BY step ORDER BY step"
        )
    elif by == "rank-step":
        cur = con.execute(
            f"SELECT step, rank, {', '.join(TP_COLUMNS)}, overlap_pct FROM time_partition "
            "WHERE step IS NOT NULL ORDER BY step, rank"
        )
    else:
        raise ValueError(f"by must be one of {', '.join(BY)}, not {by!r}")
    return _with_percentages(records(PlainTable.from_cursor(cur)))


def top_kernels(con: duckdb.DuckDBPyConnection, limit: int = TOP_KERNELS) -> list[dict[str, Any]]:
    """The kernels with the most summed GPU time over all ranks (kernel_summary when present)."""
    if has_relation(con, "kernel_summary"):
        sql = (
            "SELECT name, mode(category) AS category, sum(instances)::BIGINT AS instances, "
            "sum(total_ns)::BIGINT AS total_ns FROM kernel_summary GROUP BY name"
        )
    else:
        sql = (
            "SELECT name, mode(category) AS category, count(*) AS instances, "
            "sum(end_ns - start_ns)::BIGINT AS total_ns FROM kernels GROUP BY name"
        )
    cur = con.execute(  # LIMIT inlined: a bound parameter imports pandas (duck.sql_string)
        f"SELECT *, 100.0 * total_ns / nullif(sum(total_ns) OVER (), 0) AS pct FROM ({sql}) "
        f"ORDER BY total_ns DESC, name LIMIT {int(limit)}"
    )
    return records(PlainTable.from_cursor(cur))


def _mark_one_time(con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]]) -> None:
    """Per-step rows get `one_time`: the step holds one-time work on some rank (job_steps)."""
    if not rows or "step" not in rows[0]:
        return
    flags = (
        dict(con.execute("SELECT step, bool_or(one_time) FROM job_steps GROUP BY step").fetchall())
        if has_relation(con, "job_steps")
        else {}
    )
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
    rows = con.execute(
        "SELECT step, max(job_step_ns), bool_or(one_time), bool_and(steady) FROM job_steps "
        "GROUP BY step ORDER BY step"
    ).fetchall()
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


def step_stats_line(stats: dict[str, Any] | None) -> str:
    """One line of `step_stats` for the terminal: the mean and median job step time."""
    if not stats:
        return ""
    over = stats["steady_steps"] or stats["steps"]
    what = (
        f"{over} steady steps of {stats['steps']}"
        if stats["one_time_steps"] and stats["steady_steps"]
        else f"{over} steps"
    )
    return (
        f"job step time (slowest rank): mean {format_duration(stats['mean_step_ns'])}, median "
        f"{format_duration(stats['median_step_ns'])} over {what}"
    )


def step_sources(con: duckdb.DuckDBPyConnection) -> dict[int, str]:
    """How each rank's steps were found: nvtx | detected | periodic | graph replay | annotation |
    capture (queries/steps/steps.sql), every source of its steps, comma-separated, when they differ (a
    periodic rank some of whose steps were merged at a graph replay: 'graph replay, periodic')."""
    rows = con.execute(
        "SELECT rank, string_agg(DISTINCT source, ', ' ORDER BY source) FROM steps "
        "GROUP BY rank ORDER BY rank"
    ).fetchall()
    return dict(rows)


def step_source_line(step_source: dict[Any, str]) -> str:
    """Every step source of the ranks shown, once each: the "steps from:" of the partition's title."""
    return ", ".join(sorted({s for v in step_source.values() for s in str(v).split(", ")}))


# The ingest's corrupt-timing warnings (CORRUPT_TIMING) of the files of the ranks shown, one row
# per file and warning: what `summary` prints above the partition and diagnose's corrupt-timing note
# lists (the prefix inlined: a bound parameter imports pandas, duck.sql_string).
CORRUPT_TIMING_SQL = f"""SELECT f.path, list_sort(list(DISTINCT r.rank)) AS ranks, u.w AS warning
    FROM files AS f, unnest(f.warnings) AS u(w)
    JOIN ranks AS r ON r.file_id = f.file_id
    WHERE starts_with(u.w, {sql_string(CORRUPT_TIMING)})
    GROUP BY f.path, u.w ORDER BY f.path, u.w"""


def timing_warnings(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The file warnings that the trace's times are corrupt for some rows, as `path: warning`:
    they change the partition, so it is not shown without them."""
    rows = con.execute(f"SELECT path || ': ' || warning FROM ({CORRUPT_TIMING_SQL})").fetchall()
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


def _cell(ns: float | None, pct: float | None) -> str:
    """A time in human units with its share of the window: '19.37 ms (2.0%)'."""
    text = format_duration(ns)
    return text if pct is None or text == UNKNOWN else f"{text} ({format_pct(pct)})"


def _keys(row: dict[str, Any], by: str, ranks: bool = True) -> dict[str, Any]:
    if by == "step":
        return {"step": row["step"], "ranks": row["ranks"]} if ranks else {"step": row["step"]}
    if by == "rank-step":
        return {"step": row["step"], "rank": row["rank"]}
    return {"rank": row["rank"]}


def _per_rank(row: dict[str, Any], by: str, col: str) -> float | None:
    """A partition value of the row: the mean per rank for by='step' (the row holds sums)."""
    value = row.get(col)
    if value is None or by != "step":
        return value
    return value / row["ranks"] if row["ranks"] else None


def partition_table(rows: list[dict[str, Any]], by: str) -> PlainTable:
    """Display form of `partition()`: times in human units with the share of the window.

    by='step': the job's step time (the slowest rank's window) and that rank, then the
    partition of the mean rank (sums over ranks / ranks)."""
    out = []
    for row in rows:
        line = _keys(row, by)
        if by == "step":
            line["job step time"] = format_duration(row.get("job_step_ns"))
            line["slowest rank"] = row.get("slowest_rank")
            line["mean window"] = format_duration(_per_rank(row, by, "window_ns"))
        else:
            line["window"] = format_duration(row["window_ns"])
        for heading, col in DISPLAY:
            line[heading] = _cell(_per_rank(row, by, col), row.get(col.replace("_ns", "_pct")))
        line["overlap"] = format_pct(row.get("overlap_pct"))
        out.append(line)
    return PlainTable.from_records(out)


def idle_table(rows: list[dict[str, Any]], by: str) -> PlainTable:
    """Display form of the idle split and communication of `partition()` (shares of the window)."""
    out = []
    for row in rows:
        line = _keys(row, by, ranks=False)
        for heading, col in DISPLAY_IDLE:
            line[heading] = _cell(_per_rank(row, by, col), row.get(col.replace("_ns", "_pct")))
        out.append(line)
    return PlainTable.from_records(out)


def kernels_table(kernels: list[dict[str, Any]]) -> PlainTable:
    """Display form of `top_kernels()` (the renderer elides names to the terminal's width)."""
    columns = ["name", "category", "instances", "total_ns", "%"]
    if not kernels:
        return PlainTable(columns)
    return PlainTable.from_records([{**k, "%": format_pct(k.get("pct"))} for k in kernels], columns)


_TITLES = {
    "rank": ("GPU time partition per rank, whole capture", "Idle time by cause and communication per rank"),
    "step": (
        "GPU time per step: job step time = the slowest rank's window; partition = mean per rank",
        "Idle time by cause and communication per step (mean per rank)",
    ),
    "rank-step": (
        "GPU time partition per rank and step",
        "Idle time by cause and communication per rank and step",
    ),
}


def print_summary(
    con: duckdb.DuckDBPyConnection, by: str = "rank", result: dict[str, Any] | None = None
) -> None:
    """The terminal rendering of `summary()` (also used by `nsight-analyze demo`)."""
    result = result or summary(con, by=by)
    for warning in result.get("warnings", []):
        echo(f"warning: {clean(warning)}", hang="    ")
    for note in result.get("notes", []):
        echo(f"note: {clean(note)}", hang="    ")
    rows = result["partition"]
    if not rows:
        if by != "rank":
            echo("no steps found: use --by rank (the whole capture is one window), or --step-pattern")
            return
        held = result.get("no_timeline")  # counters without a timeline, and who reads them
        echo("no GPU operations in this workspace (nothing to partition)" + (f": {held}" if held else ""))
        return
    sources = step_source_line(result["step_source"])
    line = step_stats_line(result.get("step_stats"))
    if line:
        echo(line, hang="    ")
    keys = 2 if by == "rank-step" else 1
    main_title, idle_title = _TITLES[by]
    print_table(partition_table(rows, by), title=f"{main_title} (steps from: {sources})", keys=keys)
    print()
    print_table(idle_table(rows, by), title=f"{idle_title}; % of the window", keys=keys)
    kernels = kernels_table(result["top_kernels"])
    if not kernels.empty:
        print()
        print_table(kernels, title="Top kernels (all ranks)")
