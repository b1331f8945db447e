"""`nsight-analyze gpus`: which GPU each rank ran on, the dense peak used for MFU/HFU, and why."""

from __future__ import annotations

import click
import pandas as pd

from ..clihelp import db_option, format_option, gpu_option
from ..gpus import DEFAULT_PRECISION, PRECISIONS, models, rank_peaks, validate_gpu
from ..render import emit, records, to_json
from ..workspace import open_workspace

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


def _shown(df: pd.DataFrame) -> pd.DataFrame:
    """Table view: an unknown peak reads 'unknown', not a blank a reader could take for zero."""
    out = df.astype(object)
    unknown = df["peak_tflops"].isna()
    out.loc[unknown, "peak_tflops"] = "unknown"
    out.loc[unknown, "ridge_flop_per_byte"] = "unknown"
    return out


@click.command("gpus")
@db_option
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
@format_option("table", "csv", "json")
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
    FLOP/clk/SM, tensor-clock derated), given (--gpu), assumed (env hint PEAK_FLOPS_PER_GPU, or
    kernel names only one architecture runs), override (--peak-tflops), unknown (MFU/HFU unknown
    until --gpu or --peak-tflops says what the GPU is).
    """
    if list_models:
        emit(models(), fmt, title="GPU models --gpu accepts (a name or any alias; dense bf16 peak)")
        return
    validate_gpu(gpu)
    con = open_workspace(db, read_only=True)
    try:
        df = rank_peaks(con, peak_tflops=peak_tflops, precision=precision, gpu=gpu)
        ncu = con.execute(
            """
            SELECT p.file_id, f.path, p.source, p.peak_flops / 1e12 AS peak_tflops,
                   p.mem_bw_bps / 1e9 AS mem_bw_gbs, p.reason
            FROM ncu_peaks p LEFT JOIN files f USING (file_id)
            WHERE p.precision = ? ORDER BY p.file_id
            """,
            [precision],
        ).df()
    finally:
        con.close()
    cols = COLUMNS + ([f"peak_{p}_tflops" for p in PRECISIONS] if all_precisions or fmt == "json" else [])
    if fmt == "json":
        print(to_json({"ranks": records(df), "ncu_files": records(ncu)}))
        return
    emit(_shown(df[cols]) if fmt == "table" else df[cols], fmt, title=f"Dense {precision} peak per rank")
    if len(ncu) and fmt == "table":
        emit(ncu, fmt, title=f"Nsight Compute files (roofline ridge points use these {precision} peaks)")
