"""`nsight-analyze mfu`: MFU (model FLOPs) and HFU (counted FLOPs) per step, side by side."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import click

from ..api import Workspace
from ..clihelp import gpu_option, job_option, output_options
from ..mfu.options import MfuOptions
from ..plain import missing
from ..render.data import to_json
from ..render.markdown import markdown_text
from ..render.output import emit
from ..render.table import PlainTable
from ..render.terminal import wrap

MAX_STEP_ROWS = 40


def mfu_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The click options of MfuOptions' fields, in their order (help and choices from the field
    metadata; --gpu is clihelp's shared option), passed to the command under the field names."""
    for f in reversed(dataclasses.fields(MfuOptions)):
        cli = f.metadata
        if cli["flag"] is None:
            command = gpu_option(command)
            continue
        kind: Any = click.Choice(list(cli["choices"])) if cli["choices"] else cli["type"]
        command = click.option(
            cli["flag"],
            f.name,
            type=kind,
            default=f.default,
            show_default=bool(cli["choices"]),
            help=cli["help"] or None,
        )(command)
    return command


def _table(rows: list[dict[str, Any]], human: bool) -> PlainTable:
    """Step, ranks, longest window, MFU and HFU in %, coverage; `human`: an unknown MFU or HFU
    reads "unknown" (the notes say why), not a blank that reads as nothing."""

    def pct(v: float | None) -> float | str | None:
        return 100.0 * v if not missing(v) else ("unknown" if human else None)

    def whole(v: Any) -> int | None:  # the "all" row has none
        return None if v is None else int(v)

    out = [
        (
            str(r["step"]),
            whole(r["ranks"]),
            whole(r["window_ns_max"]),
            pct(r["mfu"]),
            pct(r["hfu"]),
            r["coverage_pct"],
        )
        for r in rows
    ]
    # numeric where a DataFrame of these rows would be (the CSV and the cells' alignment)
    numeric = [False, False, False] + [not human and any(r[i] is not None for r in out) for i in (3, 4)]
    numeric.append(any(r[5] is not None for r in out))
    return PlainTable(["step", "ranks", "window_ns_max", "mfu_pct", "hfu_pct", "coverage_pct"], out, numeric)


@click.command("mfu")
@mfu_options
@job_option
@output_options()
def command(db: str, job: int | None, fmt: str, **options: Any) -> None:
    """MFU = model FLOPs / (step time x GPUs x dense peak); HFU = counter FLOPs / (window x peak).

    MFU needs --model-flops-per-step or a model description; without them, a PyTorch-profiler
    trace recorded with record_shapes=True gives the model FLOPs itself (its matmul, convolution
    and attention ops' FLOPs, `op_flops`; labelled "from trace shapes"). HFU needs Nsight Compute data
    ingested into the same workspace; its coverage (share of kernel time with counters) is shown.
    Both need the GPU's peak: when the trace does not record the GPU, state it with --gpu
    (or --peak-tflops); otherwise they are shown as unknown rather than guessed.
    CSV and Markdown: the table (MFU/HFU in %); JSON: fractions (0.42 = 42 %).
    Python: nsight_analyze.open(DB).mfu(...), .mfu_summary(...) (the JSON document).
    """
    ws = Workspace(db, job=job)  # one job of a workspace of several (job_scope.py)
    summary = ws.mfu_summary(MfuOptions(**options))
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
    gpus = f"{summary['n_gpus']} GPUs" if summary["n_gpus"] else "no traced GPU"
    emit(
        _table(rows, human=fmt in ("table", "markdown")),
        fmt,
        title=f"MFU and HFU ({summary['precision']}, {summary['windows']}, {gpus})",
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
