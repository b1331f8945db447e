"""`nsight-analyze summary`: where each rank's (or each step's) GPU time goes."""

from __future__ import annotations

import click

from ..clihelp import db_option, format_option
from ..render import to_json
from ..summary import print_summary, summary
from ..workspace import open_workspace


@click.command("summary")
@db_option
@click.option(
    "--by",
    type=click.Choice(["rank", "step"]),
    default="rank",
    show_default=True,
    help="One row per rank (whole capture) or per step (summed over ranks).",
)
@format_option("table", "json")
def command(db: str, by: str, fmt: str) -> None:
    """Time partition per rank or step: compute, memory, exposed comms, idle and its causes.

    Times are milliseconds with the share of the window; JSON gives integer nanoseconds under
    the column names of the time_partition view (plus *_pct shares).
    """
    con = open_workspace(db, read_only=True)
    try:
        result = summary(con, by=by)
        if fmt == "json":
            click.echo(to_json(result))
        else:
            print_summary(con, by=by, result=result)
    finally:
        con.close()
