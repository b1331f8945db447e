"""`nsight-analyze mfu`: MFU (model FLOPs) and HFU (counted FLOPs) per step, side by side."""

from __future__ import annotations

import click
import pandas as pd

from ..api import Workspace
from ..clihelp import gpu_option, job_option, output_options
from ..flops import FORMULAS, RECOMPUTE
from ..gpus import DEFAULT_PRECISION, PRECISIONS
from ..render.data import to_json
from ..render.markdown import markdown_text
from ..render.output import emit
from ..render.terminal import wrap

MAX_STEP_ROWS = 40


@click.command("mfu")
@click.option(
    "--model-flops-per-step",
    type=float,
    default=None,
    help="Model FLOPs of one training step of the whole job (forward + backward, no recomputation).",
)
@click.option("--params", type=float, default=None, help="N: parameters taking part in matmuls (e.g. 7e9).")
@click.option(
    "--tokens-per-step", type=float, default=None, help="Tokens per step, whole job (global batch x seq)."
)
@click.option("--layers", type=int, default=None, help="L: transformer layers.")
@click.option("--hidden", type=int, default=None, help="H: hidden size (heads x head dim).")
@click.option("--seq-len", type=int, default=None, help="S: sequence length.")
@click.option("--vocab", type=int, default=None, help="V: vocabulary size (Megatron formula's logit term).")
@click.option(
    "--recompute",
    type=click.Choice(list(RECOMPUTE)),
    default="none",
    show_default=True,
    help="Activation recomputation: adds hardware FLOPs (expected HFU/MFU), never model FLOPs.",
)
@click.option(
    "--formula",
    type=click.Choice(list(FORMULAS)),
    default="palm",
    show_default=True,
    help="palm: (6N + 12·L·H·S) per token; megatron: 72·B·L·S·h²·(1 + S/6h + V/12hL) per step.",
)
@gpu_option
@click.option(
    "--peak-tflops", type=float, default=None, help="Dense peak per GPU in TFLOP/s (overrides the table)."
)
@click.option(
    "--precision", type=click.Choice(list(PRECISIONS)), default=DEFAULT_PRECISION, show_default=True
)
@click.option(
    "--gpus",
    "n_gpus",
    type=int,
    default=None,
    help="GPUs in the job (default: world size in the traces, else the number of ranks).",
)
@click.option(
    "--steps",
    "steps_in_window",
    type=int,
    default=None,
    help="Steps in the capture when no step windows were found.",
)
@job_option
@output_options()
def command(
    db: str,
    model_flops_per_step: float | None,
    params: float | None,
    tokens_per_step: float | None,
    layers: int | None,
    hidden: int | None,
    seq_len: int | None,
    vocab: int | None,
    recompute: str,
    formula: str,
    gpu: str | None,
    peak_tflops: float | None,
    precision: str,
    n_gpus: int | None,
    steps_in_window: int | None,
    job: int | None,
    fmt: str,
) -> None:
    """MFU = model FLOPs / (step time x GPUs x dense peak); HFU = counter FLOPs / (window x peak).

    MFU needs --model-flops-per-step or a model description. HFU needs Nsight Compute data
    ingested into the same workspace; its coverage (share of kernel time with counters) is shown.
    Both need the GPU's peak: when the trace does not record the GPU, state it with --gpu
    (or --peak-tflops); otherwise they are shown as unknown rather than guessed.
    CSV and Markdown: the table (MFU/HFU in %); JSON: fractions (0.42 = 42 %).
    Python: nsight_analyze.open(DB).mfu(...), .mfu_summary(...) (the JSON document).
    """
    ws = Workspace(db, job=job)  # one job of a workspace of several (job_scope.py)
    summary = ws.mfu_summary(
        model_flops_per_step=model_flops_per_step,
        params=params,
        tokens_per_step=tokens_per_step,
        layers=layers,
        hidden=hidden,
        seq_len=seq_len,
        vocab=vocab,
        recompute=recompute,
        formula=formula,
        peak_tflops=peak_tflops,
        precision=precision,
        n_gpus=n_gpus,
        steps_in_window=steps_in_window,
        gpu=gpu,
    )
    note = ws.scope.note() if ws.scope else None
    if fmt == "json":
        print(to_json(summary))
        return
    if note and fmt == "table":
        click.echo(wrap(note))
    rows = list(summary["per_step"])
    if len(rows) > MAX_STEP_ROWS and fmt == "table":  # csv and markdown: every step
        click.echo(
            f"{len(rows)} steps: showing the first and last {MAX_STEP_ROWS // 2} (--format json for all)"
        )
        rows = rows[: MAX_STEP_ROWS // 2] + rows[-(MAX_STEP_ROWS // 2) :]
    rows.append(
        {
            "step": "all",
            "ranks": None,
            "window_ns_max": None,
            "mfu": summary["mfu"],
            "hfu": summary["hfu"],
            "coverage_pct": summary["coverage_pct"],
        }
    )
    df = pd.DataFrame(rows, columns=["step", "ranks", "window_ns_max", "mfu", "hfu", "coverage_pct"])
    for col in ("mfu", "hfu"):
        df[col + "_pct"] = df[col].map(lambda v: None if v is None or pd.isna(v) else 100.0 * v)
        if fmt in ("table", "markdown"):  # say "unknown" (see the notes), not a blank that reads as nothing
            df[col + "_pct"] = df[col + "_pct"].astype(object).where(df[col + "_pct"].notna(), "unknown")
    df["step"] = df["step"].astype(str)
    for col in ("ranks", "window_ns_max"):  # whole numbers; the "all" row has none
        df[col] = pd.Series([None if pd.isna(v) else int(v) for v in df[col]], dtype=object)
    emit(
        df[["step", "ranks", "window_ns_max", "mfu_pct", "hfu_pct", "coverage_pct"]],
        fmt,
        title=f"MFU and HFU ({summary['precision']}, {summary['windows']}, {summary['n_gpus']} GPUs)",
    )
    if fmt in ("table", "markdown"):
        lines = []
        if summary["model_flops"]:
            lines.append(f"model FLOPs: {summary['model_flops']['explanation']}")
        if summary["hfu_over_mfu"] is not None:
            lines.append(f"HFU/MFU = {summary['hfu_over_mfu']:.3f}")
        if summary["hfu_tensor_active"] is not None:
            lines.append(f"tensor-active estimate: {100 * summary['hfu_tensor_active']:.1f}%")
        lines += summary["gap"] + summary["notes"] + ([note] if note and fmt == "markdown" else [])
        if fmt == "markdown" and lines:
            click.echo()
        for line in lines:
            click.echo(
                "- " + markdown_text(line) if fmt == "markdown" else wrap(line, indent="  ", hang="    ")
            )
