"""`nsight-analyze demo`: the main job on the bundled sample traces, end to end."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import UserError
from .ingest import IngestProgress, Spinner, progress_wanted


def sample_traces_dir() -> Path:
    """sample_traces/ of the source checkout (the demo is run from the repository)."""
    for base in (Path.cwd(), Path(__file__).resolve().parents[2]):
        candidate = base / "sample_traces"
        if any(candidate.glob("*.sqlite")):
            return candidate
    raise UserError("sample_traces/ not found: run the demo from the nsight-analyze source checkout")


@click.command("demo")
@click.argument("out", required=False, default="demo_out", type=click.Path(file_okay=False, path_type=Path))
def command(out: Path) -> None:
    """Ingest sample_traces/, print the summary and write the HTML report into OUT."""
    from ..api.outputs import write_report
    from ..ingest.run import ingest
    from ..render.summary_tables import print_summary
    from ..store.workspace import open_workspace
    from ..summary import summary

    out.mkdir(parents=True, exist_ok=True)
    db = out / "nsight_analyze.duckdb"
    traces = sample_traces_dir()
    with IngestProgress(enabled=progress_wanted()) as progress:  # a bar on a terminal, else silent
        report = ingest(
            [traces], db, replace=True, progress=progress.update, analysis_progress=progress.analysis
        )
    failed = report.by_status("failed")
    if failed:
        raise UserError(f"{failed[0].path}: {failed[0].message}")
    con = open_workspace(db)
    try:
        print_summary(summary(con))
        with Spinner("writing the report"):
            html = write_report(con, out / "report.html")
    finally:
        con.close()
    click.echo(f"\nworkspace: {db}\nreport:    {html.resolve()}")
