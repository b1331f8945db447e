"""Per-rank / per-step time partition summary: the library behind `nsight-analyze summary`.

Why a library: the terminal command, the JSON output and the HTML report must show the same
numbers; they all call `summary()` and only render differently.
"""

from __future__ import annotations

from typing import Any

import duckdb
import pandas as pd

from .render import print_table, records

PATTERN_SETTINGS = ("step_pattern", "input_pattern")
PARTS = ["compute_ns", "memory_ns", "other_ns", "comms_exposed_ns", "idle_ns"]
IDLE_PARTS = ["launch_gap_ns", "input_stall_ns", "sync_stall_ns", "host_bound_ns", "idle_other_ns"]
TP_COLUMNS = ["window_ns", *PARTS, *IDLE_PARTS, "comms_total_ns", "comms_hidden_ns"]
TOP_KERNELS = 10
NAME_WIDTH = 80  # kernel names in the terminal table (templates can run to thousands of characters)

# (heading, time_partition column) in display order; the idle split follows idle.
DISPLAY = [
    ("compute", "compute_ns"),
    ("memory", "memory_ns"),
    ("other", "other_ns"),
    ("comms exposed", "comms_exposed_ns"),
    ("idle", "idle_ns"),
    ("launch gap", "launch_gap_ns"),
    ("input stall", "input_stall_ns"),
    ("sync stall", "sync_stall_ns"),
    ("host bound", "host_bound_ns"),
    ("idle other", "idle_other_ns"),
    ("comms total", "comms_total_ns"),
]


def prepare(con: duckdb.DuckDBPyConnection) -> None:
    """Copy the regex settings into session variables so the views compile each regex once.

    The views read `settings` either way; without these variables a regex taken from a table is
    compiled for every row (~30 us each), which dominates on large NVTX tables.
    """
    for key in PATTERN_SETTINGS:
        con.execute(f"SET VARIABLE {key} = (SELECT value FROM settings WHERE key = ?)", [key])


def _has_view(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    row = con.execute(
        "SELECT count(*) FROM duckdb_views() WHERE view_name = ? AND NOT internal", [name]
    ).fetchone()
    return bool(row and row[0])


def _with_percentages(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for row in rows:
        window = row["window_ns"] or 0
        for col in TP_COLUMNS[1:]:
            row[col.replace("_ns", "_pct")] = round(100.0 * row[col] / window, 3) if window else None
    return rows


def partition(con: duckdb.DuckDBPyConnection, by: str = "rank") -> list[dict[str, Any]]:
    """time_partition rows: the whole capture per rank (by='rank'), or per step summed over ranks.

    by='step' sums each column over the ranks that have the step (rank-nanoseconds), so a step's
    percentages are GPU-time shares across the job; `ranks` says how many ranks contributed.
    """
    if by == "rank":
        df = con.execute(
            f"SELECT rank, {', '.join(TP_COLUMNS)}, overlap_pct FROM time_partition "
            "WHERE step IS NULL ORDER BY rank"
        ).df()
    elif by == "step":
        sums = ", ".join(f"sum({c})::BIGINT AS {c}" for c in TP_COLUMNS)
        df = con.execute(
            f"SELECT step, count(*) AS ranks, {sums}, "
            "CASE WHEN sum(comms_total_ns) > 0 THEN 100.0 * sum(comms_hidden_ns) / sum(comms_total_ns) END "
            "AS overlap_pct FROM time_partition WHERE step IS NOT NULL GROUP BY step ORDER BY step"
        ).df()
    else:
        raise ValueError(f"by must be 'rank' or 'step', not {by!r}")
    return _with_percentages(records(df))


def top_kernels(con: duckdb.DuckDBPyConnection, limit: int = TOP_KERNELS) -> list[dict[str, Any]]:
    """The kernels with the most summed GPU time over all ranks (kernel_summary when present)."""
    if _has_view(con, "kernel_summary"):
        sql = (
            "SELECT name, mode(category) AS category, sum(instances)::BIGINT AS instances, "
            "sum(total_ns)::BIGINT AS total_ns FROM kernel_summary GROUP BY name"
        )
    else:
        sql = (
            "SELECT name, mode(category) AS category, count(*) AS instances, "
            "sum(end_ns - start_ns)::BIGINT AS total_ns FROM kernels GROUP BY name"
        )
    df = con.execute(
        f"SELECT *, 100.0 * total_ns / nullif(sum(total_ns) OVER (), 0) AS pct FROM ({sql}) "
        "ORDER BY total_ns DESC, name LIMIT ?",
        [limit],
    ).df()
    return records(df)


def step_sources(con: duckdb.DuckDBPyConnection) -> dict[int, str]:
    """How each rank's steps were found: nvtx | detected | capture."""
    rows = con.execute("SELECT rank, any_value(source) FROM steps GROUP BY rank ORDER BY rank").fetchall()
    return dict(rows)


def summary(con: duckdb.DuckDBPyConnection, by: str = "rank", refresh: bool = True) -> dict[str, Any]:
    """Everything `nsight-analyze summary` shows, as plain data (JSON-ready).

    refresh=False reuses what an earlier `materialize(con)` of this session computed.
    """
    if refresh:
        materialize(con)
    return {
        "by": by,
        "partition": partition(con, by),
        "step_source": step_sources(con),
        "top_kernels": top_kernels(con),
    }


def _cell(ns: int, pct: float | None) -> str:
    ms = f"{ns / 1e6:,.3f}"
    return ms if pct is None else f"{ms} ({pct:.1f}%)"


def partition_table(rows: list[dict[str, Any]], by: str) -> pd.DataFrame:
    """Display form of `partition()`: milliseconds with the share of the window in parentheses."""
    out = []
    for row in rows:
        line: dict[str, Any] = {by: row[by]}
        if by == "step":
            line["ranks"] = row["ranks"]
        line["window ms"] = _cell(row["window_ns"], None)
        for heading, col in DISPLAY:
            line[f"{heading} ms (%)"] = _cell(row[col], row.get(col.replace("_ns", "_pct")))
        line["overlap %"] = "" if row["overlap_pct"] is None else f"{row['overlap_pct']:.1f}"
        out.append(line)
    return pd.DataFrame(out)


def kernels_table(kernels: list[dict[str, Any]]) -> pd.DataFrame:
    """Display form of `top_kernels()`: shortened names, milliseconds."""
    df = pd.DataFrame(kernels)
    if df.empty:
        return df
    df["name"] = [n if len(n) <= NAME_WIDTH else n[: NAME_WIDTH - 3] + "..." for n in df["name"].astype(str)]
    df["total ms"] = (df["total_ns"] / 1e6).round(3)
    df["%"] = df["pct"].round(1)
    return df[["name", "category", "instances", "total ms", "%"]]


def print_summary(
    con: duckdb.DuckDBPyConnection, by: str = "rank", result: dict[str, Any] | None = None
) -> None:
    """The terminal rendering of `summary()` (also used by `nsight-analyze demo`)."""
    result = result or summary(con, by=by)
    rows = result["partition"]
    if not rows:
        print(
            "no GPU operations in this workspace (nothing to partition)"
            if by == "rank"
            else "no steps found: use --by rank (the whole capture is one window)"
        )
        return
    sources = ", ".join(sorted(set(result["step_source"].values())))
    print_table(partition_table(rows, by), title=f"GPU time partition per {by} (steps from: {sources})")
    kernels = kernels_table(result["top_kernels"])
    if not kernels.empty:
        print_table(kernels, title="Top kernels (all ranks)")


# Not tp_gaps: time_partition reads it once, and as a temporary table its millions of rows
# took a third of the analysis' memory cap (DuckDB then spilled) for no reuse.
MATERIALIZED = ("steps", "tp_segments", "tp_gap_spans")


def materialize(con: duckdb.DuckDBPyConnection) -> None:
    """Compute the partition's shared intermediates once, as session-temporary tables.

    Why: views are recomputed by every query that reads them, and the partition, its gaps and
    sync_calls all rest on the same sweep (tp_segments), gaps and steps; at 64 ranks x 200k kernels
    recomputing them per view costs more than the analysis itself. A TEMP table of the same name
    shadows the view for this connection only (read-only workspaces included) and is dropped with
    it; the workspace file is not changed. Call `dematerialize()` (or reconnect) after changing
    data or settings in the same session.
    """
    prepare(con)
    catalog = con.execute("SELECT current_database()").fetchone()[0]
    for name in MATERIALIZED:  # in dependency order: each reads the ones before it
        con.execute(f'CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM "{catalog}".main.{name}')


def dematerialize(con: duckdb.DuckDBPyConnection) -> None:
    """Drop the temporary tables of `materialize()`: the views are live again."""
    for name in reversed(MATERIALIZED):
        con.execute(f"DROP TABLE IF EXISTS temp.main.{name}")
