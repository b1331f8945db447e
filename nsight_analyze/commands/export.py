"""`nsight-analyze export`: the workspace as Parquet files or as a Chrome-trace JSON timeline."""

from __future__ import annotations

from pathlib import Path

import click

from ..clihelp import db_option
from .ingest import Spinner


@click.command("export")
@click.argument("out", type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["parquet", "chrome-trace"]),
    required=True,
    help="parquet: OUT is a folder of <table>.parquet files and manifest.json; "
    "chrome-trace: OUT is one .json (or .json.gz) file for chrome://tracing and the Perfetto UI.",
)
@db_option
@click.option(
    "--steps",
    "steps",
    default=None,
    metavar="A:B",
    help="chrome-trace only: steps A to B, inclusive (e.g. 3:7, 5:, :4, or one step N).",
)
@click.option(
    "--ranks",
    "ranks",
    default=None,
    metavar="LIST",
    help="Only these ranks, e.g. 0,2-3 (parquet: the rows of tables with a rank column).",
)
@click.option("--force", is_flag=True, help="Overwrite a non-empty OUT folder or an existing OUT file.")
def command(out: Path, fmt: str, db: str, steps: str | None, ranks: str | None, force: bool) -> None:
    """Export the workspace: every table as Parquet, or the aligned timeline as a Chrome trace.

    Python: nsight_analyze.open(DB).export(OUT, format, steps=..., ranks=...)."""
    from ..api import Workspace

    done = Workspace(db).export(out, fmt, steps, ranks, force, while_writing=Spinner)
    if fmt == "parquet":
        click.echo(f"parquet: {out.resolve()} ({len(done.tables)} tables, {done.rows:,} rows, manifest.json)")
        return
    trace = done
    c = trace.counts
    click.echo(
        f"chrome-trace: {out.resolve()} ({trace.events:,} events: {c.get('kernels', 0):,} kernels, "
        f"{c.get('memops', 0):,} memory operations, {c.get('idle', 0):,} idle gaps, "
        f"{c.get('steps', 0):,} steps, "
        f"{c.get('flows', 0) // 2:,} collective flows; {len(trace.ranks)} rank(s); "
        f"{out.stat().st_size / 1e6:.1f} MB)"
    )
