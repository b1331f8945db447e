"""`nsight-analyze report`: write the self-contained HTML report of a workspace."""

from __future__ import annotations

from pathlib import Path

import click

from ..clihelp import db_option, gpu_option, job_option, step_pattern_option
from ..gpus.table import validate_gpu
from ..render.terminal import echo
from ..store.job_scope import scope
from ..store.workspace import open_workspace
from .ingest import Spinner


@click.command("report")
@db_option
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(dir_okay=False, path_type=Path),
    default="report.html",
    show_default=True,
    help="HTML file to write (one self-contained file; works offline).",
)
@click.option(
    "--steps",
    "steps",
    default=None,
    metavar="A:B",
    help="Only steps A to B, inclusive (e.g. 3:7, 5:, :4, or one step N).",
)
@click.option(
    "--model-flops-per-step",
    type=float,
    default=None,
    help="Model FLOPs of one training step of the whole job, for MFU (see `mfu --help`).",
)
@click.option(
    "--peak-tflops", type=float, default=None, help="Per-GPU dense peak TFLOP/s, overriding the table."
)
@click.option(
    "--runs",
    "runs_page",
    is_flag=True,
    help="Write the runs page instead: every run (job) of the workspace, the scaling series its "
    "labels say, step time and MFU per run (`nsight-analyze runs --html FILE` selects and sorts).",
)
@gpu_option
@job_option
@step_pattern_option
def command(
    db: str,
    output: Path,
    steps: str | None,
    model_flops_per_step: float | None,
    peak_tflops: float | None,
    gpu: str | None,
    job: int | None,
    step_pattern: str | None,
    runs_page: bool = False,
) -> None:
    """Write the HTML report: partition, aligned timeline, heatmap, overlap, kernels, capture quality.

    A workspace of several jobs gets the report of one (--job N, else the one with the most
    ranks), named under the title."""
    from ..report_doc import parse_steps

    if runs_page:
        _write_runs_page(db, output)
        return
    step_range = parse_steps(steps)
    given = (("model_flops_per_step", model_flops_per_step), ("peak_tflops", peak_tflops), ("gpu", gpu))
    mfu = {k: v for k, v in given if v is not None}
    from .summary import apply_step_pattern

    apply_step_pattern(db, step_pattern)
    validate_gpu(gpu)  # here: the report turns a failed MFU section into "unknown", hiding the typo
    from ..api.outputs import write_report
    from ..report_doc import READS

    con = open_workspace(db, read_only=True, needs=READS)  # draws its own bar when it computes
    try:
        shown = scope(con, job)
        note = shown.note() if shown else None
        with Spinner(f"writing the report {output}"):
            path = write_report(con, output, step_range, mfu_options=mfu, job_note=note)
    finally:
        con.close()
    if note:
        echo(note)
    click.echo(f"report: {path.resolve()} ({path.stat().st_size / 1e6:.1f} MB)")


def _write_runs_page(db: str, output: Path) -> None:
    """`report --runs`: the runs page of every run (runs.runs() with its defaults)."""
    from ..render.report.runs_page import write_runs_page
    from ..runs import READS, runs

    con = open_workspace(db, read_only=True, must_exist=True, needs=READS)
    try:
        result = runs(con)
    finally:
        con.close()
    path = write_runs_page(result, output)
    click.echo(f"runs page: {path.resolve()} ({path.stat().st_size / 1e6:.1f} MB)")
