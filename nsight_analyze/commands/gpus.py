"""`nsight-analyze gpus`: which GPU each rank ran on, the dense peak used for MFU/HFU, and why."""

from __future__ import annotations

from typing import Any

import click

from ..clihelp import gpu_option, output_options
from ..gpus import MODEL_COLUMNS, model_rows, peaks_precision_label
from ..gpus.table import DEFAULT_PRECISION, PRECISIONS
from ..render.data import records, to_json
from ..render.output import emit
from ..render.table import PlainTable
from ..render.terminal import echo

COLUMNS = [
    "rank",
    "gpu_name",
    "model",
    "source",
    "peak_tflops",
    "mem_bw_gbs",
    "ridge_flop_per_byte",
    "reason",
]


def _shown(rows: list[dict[str, Any]], cols: list[str]) -> PlainTable:
    """Table view: an unknown peak reads 'unknown', not a blank a reader could take for zero."""
    unknown = {"peak_tflops": "unknown", "ridge_flop_per_byte": "unknown"}
    return PlainTable(
        cols,
        [[unknown[c] if r["peak_tflops"] is None and c in unknown else r[c] for c in cols] for r in rows],
        numeric=[False] * len(cols),  # numbers and words in one column: aligned by their cells
    )


@click.command("gpus")
@gpu_option
@click.option(
    "--peak-tflops",
    type=float,
    default=None,
    help="Dense peak per GPU in TFLOP/s for --precision; overrides the table for every rank.",
)
@click.option(
    "--precision",
    type=click.Choice(list(PRECISIONS)),
    default=DEFAULT_PRECISION,
    show_default=True,
    help="Precision whose peak is shown (bf16 falls back to fp16 on GPUs without BF16).",
)
@click.option("--all-precisions", is_flag=True, help="Also show the peak of every precision.")
@click.option("--list-models", is_flag=True, help="List the GPU models (and aliases) --gpu accepts.")
@output_options()
def command(
    db: str,
    gpu: str | None,
    peak_tflops: float | None,
    precision: str,
    all_precisions: bool,
    list_models: bool,
    fmt: str,
) -> None:
    """Per rank: GPU name, matched peak-table row (or derivation/assumption), dense peak and why.

    Sources: table (name matched, most specific alias first), derived (SM count x clock x
    FLOP/clk/SM, tensor-clock derated), identified (no name: the one table model whose SM/CU
    count, compute capability and memory the trace records), given (--gpu), assumed (env hint
    PEAK_FLOPS_PER_GPU, or kernel names only one architecture runs), override (--peak-tflops),
    unknown (MFU/HFU unknown until --gpu or --peak-tflops says what the GPU is). CSV: the rank rows.
    Python: nsight_analyze.open(DB).gpus(...), .ncu_peaks(precision).
    """
    if list_models:
        emit(
            PlainTable.from_records(model_rows(), MODEL_COLUMNS),
            fmt,
            title="GPU models --gpu accepts (a name or any alias; dense bf16 and fp16 peaks)",
        )
        return
    from ..api import Workspace
    from ..gpus import ncu_peaks_sql, rank_peak_rows
    from ..gpus.table import validate_gpu

    validate_gpu(gpu)
    with Workspace(db).connect(needs=None) as con:
        rows = rank_peak_rows(con, peak_tflops=peak_tflops, precision=precision, gpu=gpu)
        ncu = PlainTable.from_cursor(con.execute(ncu_peaks_sql(precision)))
    cols = COLUMNS + ([f"peak_{p}_tflops" for p in PRECISIONS] if all_precisions or fmt == "json" else [])
    if fmt == "json":
        print(to_json({"ranks": rows, "ncu_files": records(ncu)}))
        return
    human = fmt in ("table", "markdown")
    if not rows and human:  # counters only (DCGM scrapes, Nsight Compute): no traced rank to list
        echo(
            "no traced ranks in this workspace (DCGM or Nsight Compute data only): `nsight-analyze mfu` "
            "shows the DCGM estimates; `gpus --list-models` lists the peaks --gpu accepts"
        )
    else:
        shown = peaks_precision_label(precision, rows)  # fp16 on a T4
        table = _shown(rows, cols) if human else PlainTable.from_records(rows, cols)
        emit(table, fmt, title=f"Dense {shown} peak per rank")
    if len(ncu) and human:
        if fmt == "markdown":
            print()
        emit(
            ncu,
            fmt,
            title=f"Counter files (Nsight Compute, CUPTI range profiler): roofline ridge points use these "
            f"{precision} peaks",
        )
