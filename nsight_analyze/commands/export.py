"""`nsight-analyze export`: the workspace as Parquet files or as a Chrome-trace JSON timeline."""

from __future__ import annotations

from pathlib import Path

import click

from ..clihelp import db_option, require_gpu_data
from ..errors import UserError
from ..workspace import open_workspace
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
    """Export the workspace: every table as Parquet, or the aligned timeline as a Chrome trace."""
    from ..export import parse_ranks, select_ranks

    wanted = parse_ranks(ranks)
    bounds = None
    if steps is not None:
        if fmt != "chrome-trace":
            raise UserError("--steps applies to --format chrome-trace only (parquet exports whole tables)")
        from ..render.report import parse_steps

        step_range = parse_steps(steps)
        bounds = (step_range.first, step_range.last) if step_range is not None else None
    if fmt == "parquet":
        from ..export.parquet import check_folder

        check_folder(out, force)  # before opening: a refused OUT must not wait for a recompute
    else:
        from ..export.chrome_trace import check_file

        check_file(out, force)
    con = open_workspace(db, read_only=True)
    try:
        chosen = select_ranks(con, wanted)
        if fmt == "parquet":
            from ..export.parquet import export_parquet

            with Spinner(f"exporting Parquet files to {out}"):
                done = export_parquet(con, out, wanted, force=force, workspace=str(Path(db).resolve()))
            click.echo(
                f"parquet: {out.resolve()} ({len(done.tables)} tables, {done.rows:,} rows, manifest.json)"
            )
            return
        from ..export.chrome_trace import export_chrome_trace

        require_gpu_data(con, db, "export")
        with Spinner(f"writing the Chrome trace {out}"):
            trace = export_chrome_trace(con, out, chosen, bounds, force=force)
    finally:
        con.close()
    c = trace.counts
    click.echo(
        f"chrome-trace: {out.resolve()} ({trace.events:,} events: {c.get('kernels', 0):,} kernels, "
        f"{c.get('memops', 0):,} memory operations, {c.get('idle', 0):,} idle gaps, "
        f"{c.get('steps', 0):,} steps, "
        f"{c.get('flows', 0) // 2:,} collective flows; {len(chosen)} rank(s); "
        f"{out.stat().st_size / 1e6:.1f} MB)"
    )
