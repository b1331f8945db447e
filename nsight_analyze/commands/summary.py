"""`nsight-analyze summary`: where each rank's (or each step's) GPU time goes."""

from __future__ import annotations

import sys

import click
import duckdb

from ..clihelp import db_option, format_option
from ..errors import UserError
from ..render import to_json
from ..summary import BY, print_summary, summary
from ..workspace import open_workspace

STEP_PATTERN = "step_pattern"  # the settings key the step views read


def check_regex(pattern: str, option: str = "--step-pattern") -> None:
    """One clear line for a pattern DuckDB's regex engine (RE2) rejects."""
    con = duckdb.connect()
    try:
        con.execute("SELECT regexp_matches('', ?)", [pattern]).fetchone()
    except duckdb.Error as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(f"{option} {pattern!r} is not a valid RE2 regex: {first}") from None
    finally:
        con.close()


def set_step_pattern(db: str, pattern: str) -> bool:
    """Store the step pattern in the workspace's settings; True when it changed.

    The stored analysis is stamped with the settings, so the next read recomputes the steps."""
    check_regex(pattern)
    con = open_workspace(db, must_exist=True, analyse=False)
    try:
        old = con.execute("SELECT value FROM settings WHERE key = ?", [STEP_PATTERN]).fetchone()
        if old is not None and old[0] == pattern:
            return False
        con.execute(
            "INSERT INTO settings VALUES (?, ?, 'regex: NVTX ranges that delimit training steps') "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [STEP_PATTERN, pattern],
        )
        return True
    finally:
        con.close()


@click.command("summary")
@db_option
@click.option(
    "--by",
    type=click.Choice(list(BY)),
    default="rank",
    show_default=True,
    help="One row per rank (whole capture), per step (the job's step time = the slowest rank's "
    "window, and the mean rank's partition) or per rank and step.",
)
@click.option(
    "--step-pattern",
    metavar="REGEX",
    default=None,
    help="RE2 regex of the NVTX ranges that delimit steps; stored in the workspace (settings "
    "step_pattern), so later commands use it too.",
)
@format_option("table", "json")
def command(db: str, by: str, step_pattern: str | None, fmt: str) -> None:
    """Time partition per rank or step: compute, memory, exposed comms, idle and its causes.

    Times are in human units with the share of the window; JSON gives integer nanoseconds under
    the column names of the time_partition view (plus *_pct shares). With --by step, JSON rows
    hold sums over the ranks (rank-nanoseconds), `job_step_ns` (the longest window over the
    ranks: the job's step time), `slowest_rank` and `min_window_ns`.
    """
    if step_pattern is not None and set_step_pattern(db, step_pattern):
        print(f"step_pattern set to {step_pattern!r} in {db}", file=sys.stderr)
    con = open_workspace(db, read_only=True)
    try:
        result = summary(con, by=by)
        if fmt == "json":
            click.echo(to_json(result))
        else:
            print_summary(con, by=by, result=result)
    finally:
        con.close()
