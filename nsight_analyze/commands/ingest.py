"""`nsight-analyze ingest DIR`: load every per-rank export below DIR into one workspace."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import pandas as pd

from ..ingest import ingest
from ..render import print_table
from ..workspace import open_workspace


@click.command("ingest")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--db", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Workspace file [default: DIR/nsight_analyze.duckdb].")
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=2, show_default=True,
              help="Files probed in parallel.")
@click.option("--replace", is_flag=True, help="Re-ingest files already in the workspace.")
@click.option("--rules", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Extra kernel classification rules (CSV: priority,pattern,category,subcategory,note).")
@click.option("--quiet", "-q", is_flag=True, help="Only the closing summary.")
def command(inputs: tuple[Path, ...], db: Path | None, jobs: int, replace: bool, rules: Path | None, quiet: bool):
    """Read every .sqlite (and .nsys-rep via nsys) export below INPUTS into one DuckDB workspace."""
    if db is None:
        first = inputs[0]
        db = (first if first.is_dir() else first.parent) / "nsight_analyze.duckdb"
    show = None if quiet else (lambda line: click.echo(line, err=True))
    report = ingest(list(inputs), db, jobs=jobs, replace=replace, rules=rules, progress=show)
    for outcome in report.outcomes:
        if outcome.status in ("failed", "skipped") or (outcome.status != "ok" and not quiet):
            click.echo(f"{outcome.status}: {outcome.path}: {outcome.message}", err=True)
    for note in report.notes:
        click.echo(f"note: {note}", err=True)
    _closing_table(db)
    ok = len(report.by_status("ok"))
    unchanged = len(report.by_status("unchanged"))
    failed = len(report.by_status("failed"))
    skipped = len(report.by_status("skipped"))
    click.echo(
        f"workspace {db}: {ok} file(s) ingested, {unchanged} unchanged, {failed} failed, {skipped} skipped, "
        f"{len(report.by_status('ignored'))} ignored"
    )
    if report.failed:
        sys.exit(1)


def _closing_table(db: Path) -> None:
    con = open_workspace(db, read_only=True)
    try:
        df: pd.DataFrame = con.execute(
            """
            SELECT r.rank, r.hostname AS host, r.device_id AS dev, coalesce(r.gpu_name, '?') AS gpu,
                   (SELECT count(*) FROM kernels k WHERE k.rank = r.rank) AS kernels,
                   round(((SELECT max(end_ns) - min(start_ns) FROM kernels k WHERE k.rank = r.rank)) / 1e6, 3)
                       AS span_ms,
                   r.rank_source, len(f.warnings) AS warnings
            FROM ranks r JOIN files f USING (file_id) ORDER BY r.rank
            """
        ).df()
    finally:
        con.close()
    if len(df):
        print_table(df, title="ranks in the workspace")
