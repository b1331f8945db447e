"""`nsight-analyze summary`: where each rank's (or each step's) GPU time goes."""

from __future__ import annotations

import sys

import click
import duckdb

from ..api import Workspace
from ..clihelp import job_option, output_options, step_pattern_option
from ..errors import UserError
from ..render.data import to_json
from ..render.escape import clean
from ..render.markdown import markdown_table, markdown_text
from ..render.output import emit
from ..render.summary_tables import (
    TITLES,
    idle_table,
    kernels_table,
    partition_table,
    print_summary,
    step_source_line,
)
from ..render.table import PlainTable
from ..render.terminal import echo
from ..store.query_layer import statements
from ..store.workspace import open_workspace
from ..summary import BY

STEP_PATTERN = "step_pattern"  # the settings key the step views read
SQL = statements("commands/summary")


def check_step_pattern(pattern: str) -> None:
    """One clear line for a pattern DuckDB's regex engine (RE2) rejects, or one that is empty
    (it matched every range, outer and nested: steps of nothing in particular)."""
    if not pattern.strip():
        raise UserError(
            f"--step-pattern {pattern!r} matches every NVTX range: give a regex of the step ranges' "
            "names, e.g. '^train_step' (docs/metrics.md has the default)"
        )
    con = duckdb.connect()
    try:
        con.execute(SQL["pattern_check"], [pattern]).fetchone()
    except duckdb.Error as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(f"--step-pattern {pattern!r} is not a valid RE2 regex: {first}") from None
    finally:
        con.close()


def set_step_pattern(db: str, pattern: str) -> bool:
    """Store the step pattern in the workspace's settings; True when it changed.

    The stored analysis is stamped with the settings, so the next read recomputes the steps."""
    check_step_pattern(pattern)
    con = open_workspace(db, must_exist=True, analyse=False)
    try:
        old = con.execute("SELECT value FROM settings WHERE key = ?", [STEP_PATTERN]).fetchone()
        if old is not None and old[0] == pattern:
            return False
        con.execute(SQL["store_step_pattern"], [STEP_PATTERN, pattern])
        return True
    finally:
        con.close()


def apply_step_pattern(db: str, pattern: str | None) -> None:
    """--step-pattern of any command: stored (and said on stderr) when given and new; when no
    NVTX range of the workspace matches it, the line says so. Why: the steps then come from the
    next source (optimizer bursts, periodic kernels, else the whole capture) while the user
    believes they come from the pattern."""
    if pattern is not None and set_step_pattern(db, pattern):
        line = f"step_pattern set to {pattern!r} in {db}"
        if not _nvtx_matches(db, pattern):
            line += (
                "; no NVTX range matches it: steps come from the next source (optimizer bursts, "
                "periodic kernels, else the whole capture)"
            )
        print(line, file=sys.stderr)


def _nvtx_matches(db: str, pattern: str) -> bool:
    """Whether any NVTX range (with an end) matches `pattern`, as _tp_nvtx_step_ranges reads them."""
    con = open_workspace(db, read_only=True, analyse=False)
    try:
        return con.execute(SQL.sql("nvtx_matches"), {"p": pattern}).fetchone()[0]
    finally:
        con.close()


def set_periodic_steps(db: str, on: bool) -> bool:
    """Store settings.periodic_steps ('on' | 'off'); True when it changed (the steps recompute)."""
    con = open_workspace(db, must_exist=True, analyse=False)
    try:
        value = "on" if on else "off"
        old = con.execute("SELECT value FROM settings WHERE key = 'periodic_steps'").fetchone()
        if old is not None and old[0] == value:
            return False
        con.execute(SQL["store_periodic_steps"], [value])
        return True
    finally:
        con.close()


def apply_periodic_steps(db: str, on: bool | None) -> None:
    """--periodic-steps/--no-periodic-steps of any command: stored (and said on stderr) when given and new."""
    if on is not None and set_periodic_steps(db, on):
        print(f"periodic_steps set to {'on' if on else 'off'} in {db}", file=sys.stderr)


# Shared by summary and ingest (both store step settings in the workspace).
periodic_steps_option = click.option(
    "--periodic-steps/--no-periodic-steps",
    default=None,
    help="Without NVTX steps or optimizer kernels, detect steps from a kernel that runs once per "
    "step (docs/metrics.md); --no-periodic-steps: the whole capture is one window. Stored in the "
    "workspace (settings periodic_steps) [default: on].",
)


def print_markdown(result: dict) -> None:
    """The tables of the terminal summary as Markdown (human units; JSON and CSV keep raw ns)."""
    by, rows = result["by"], result["partition"]
    if not rows:
        print("No GPU time to partition." if by == "rank" else "No steps found.")
        return
    main_title, idle_title = TITLES[by]
    sources = step_source_line(result["step_source"])
    print(markdown_table(partition_table(rows, by), f"{main_title} (steps from: {sources})"))
    print()
    print(markdown_table(idle_table(rows, by), f"{idle_title}; % of the window"))
    kernels = kernels_table(result["top_kernels"])
    if not kernels.empty:
        print()
        print(markdown_table(kernels, "Top kernels (all ranks)"))


@click.command("summary")
@click.option(
    "--by",
    type=click.Choice(list(BY)),
    default="rank",
    show_default=True,
    help="One row per rank (whole capture), per step (the job's step time = the slowest rank's "
    "window, and the mean rank's partition) or per rank and step.",
)
@step_pattern_option
@periodic_steps_option
@job_option
@output_options()
def command(
    db: str, by: str, step_pattern: str | None, periodic_steps: bool | None, job: int | None, fmt: str
) -> None:
    """Time partition per rank or step: compute, memory, exposed comms, idle and its causes.

    Times are in human units with the share of the window; JSON gives integer nanoseconds under
    the column names of the time_partition view (plus *_pct shares). With --by step, JSON rows
    hold sums over the ranks (rank-nanoseconds), `job_step_ns` (the longest window over the
    ranks: the job's step time), `slowest_rank` and `min_window_ns`. CSV: the partition rows of
    the JSON. A workspace of several jobs shows one (--job N, else the one with the most ranks)
    and says so; JSON `job` names it. Python: nsight_analyze.open(DB).summary(by), .partition(by).
    """
    apply_step_pattern(db, step_pattern)
    apply_periodic_steps(db, periodic_steps)
    result = Workspace(db, job=job).summary(by=by)
    note = (result.get("job") or {}).get("note")
    said = [
        line
        for line in [
            note,
            *(f"warning: {w}" for w in result["warnings"]),
            *(f"note: {n}" for n in result["notes"]),
        ]
        if line
    ]
    if fmt == "json":
        click.echo(to_json(result))
    elif fmt == "csv":
        for line in said:  # the CSV stays one table
            print(clean(line), file=sys.stderr)
        emit(PlainTable.from_records(result["partition"]), "csv")
    elif fmt == "markdown":
        for line in said:
            print(markdown_text(line) + "\n")
        print_markdown(result)
    else:
        if note:
            echo(note)
        print_summary(result)
