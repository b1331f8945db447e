"""The `summary` document (summary.py) as display tables and as the terminal prints it.

Why apart from the library: `summary()` returns plain data that the JSON, the report and the API
read too; how it looks (human units, shares of the window, titles, the terminal's tables) is the
renderers'. The terminal and Markdown outputs share these tables (commands/summary.py).
"""

from __future__ import annotations

from typing import Any

from .escape import clean
from .table import PlainTable
from .terminal import echo, print_table
from .units import UNKNOWN, format_duration, format_pct

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


def step_source_line(step_source: dict[Any, str]) -> str:
    """Every step source of the ranks shown, once each: the "steps from:" of the partition's title."""
    return ", ".join(sorted({s for v in step_source.values() for s in str(v).split(", ")}))


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


TITLES = {
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


def print_summary(result: dict[str, Any]) -> None:
    """The terminal rendering of a `summary.summary()` document (`summary`, `demo`)."""
    by = result["by"]
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
    main_title, idle_title = TITLES[by]
    print_table(partition_table(rows, by), title=f"{main_title} (steps from: {sources})", keys=keys)
    print()
    print_table(idle_table(rows, by), title=f"{idle_title}; % of the window", keys=keys)
    kernels = kernels_table(result["top_kernels"])
    if not kernels.empty:
        print()
        print_table(kernels, title="Top kernels (all ranks)")
