"""MFU and HFU overall, per step and per rank, side by side, with what explains the gap.

* MFU = model FLOPs per GPU per step / (step window x dense peak): how much of the GPU the
  *model* used; comparable across implementations (nsight_analyze.mfu.flops says how the
  model FLOPs were counted).
* HFU = FLOPs the hardware counted (`kernel_flops`: Nsight Compute, or the PyTorch profiler's
  CUPTI range profiler; joined to the timeline by `hfu_timeline_flops`) / (window x dense peak):
  recomputation, padding and non-model work
  included. It covers only timeline kernels that had counter data, so the share of kernel
  time with counters (`coverage_pct`) is always printed beside it.
* Where nsys or DCGM sampled GPU metrics, a tensor-pipe-activity estimate is shown as a
  cross-check (per-cycle and precision-blind, so never the headline).

This module is the summary document (`hfu_mfu_summary`, the JSON of `nsight-analyze mfu`) and
the words for the gap; one job per module beside it in this package: `options` (what MFU needs
beyond the trace, `MfuOptions`), `rows` (the per rank and window rows: windows, peaks, the
SQL), `flops` (the model FLOPs formulas) and `dcgm` (the DCGM cross-check). Their public names
are importable from here too. The totals, the per-step and the per-rank rows are SQL aggregates
over the rows' TEMP table (queries/mfu/mfu.sql); Python only assembles parameters and words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import duckdb

from .. import gpus
from ..store.query_layer import statements
from .dcgm import DCGM_ESTIMATE, dcgm_summary
from .dcgm import ratio as _ratio
from .flops import ModelFlops
from .options import MfuOptions
from .rows import (
    Peaks,
    counter_kernels,
    hfu_mfu_table,
    hfu_table,
    n_gpus_of,
    peaks_of,
    rows_table,
    trace_flops,
    windows,
)

READS = ("op_flops", "hfu_window_kernels", "kernel_summary")  # with mfu_rows': computed on first read
TRACE_FORMULA = "trace"  # ModelFlops.formula of the model FLOPs read from the trace's shapes

__all__ = [
    "DCGM_ESTIMATE",
    "NCU_HINT",
    "MfuOptions",
    "dcgm_summary",
    "explain_gap",
    "hfu_mfu_summary",
    "hfu_mfu_table",
    "hfu_table",
    "n_gpus_of",
    "windows",
]

if TYPE_CHECKING:
    import pandas as pd

SQL = statements("mfu/mfu")

NCU_HINT = (
    "ncu --metrics sm__sass_thread_inst_executed_op_fadd_pred_on.sum,"
    "sm__sass_thread_inst_executed_op_fmul_pred_on.sum,"
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__ops_path_tensor_src_bf16_dst_fp32.sum,"
    "sm__ops_path_tensor_src_fp16_dst_fp32.sum,dram__bytes.sum,gpu__time_duration.sum "
    "--launch-skip 200 --launch-count 400 --csv --page raw -o ... (then ingest the CSV beside the nsys files)"
)


def _range_notes(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Say how many CUPTI range-profiler kernels could not be placed on the timeline, and why."""
    if not counter_kernels(con)[1]:
        return []
    rows = con.execute(SQL["range_join_failures"]).fetchall()
    return [
        f"{n} CUPTI range-profiler kernels of {ranks} rank(s) are not on the timeline ({status}): their "
        "FLOPs are in kernel_flops but not in HFU"
        for status, n, ranks in rows
    ]


def _total(column: str) -> str:
    """SQL: Σ column / Σ (window x peak) over rows where both are known (GPU-time weighted)."""
    return SQL.sql("weighted_total", column=column)


def _pct(part: Any, whole: Any) -> float | None:
    """100 x part / whole for the summed nanoseconds, None when whole is 0 or unknown."""
    whole = float(whole or 0)
    return 100.0 * float(part or 0) / whole if whole > 0 else None


def _totals(con: duckdb.DuckDBPyConnection, stepped: str) -> dict[str, Any]:
    """MFU, HFU, the tensor-active estimate and the coverage over the `stepped` rows."""
    row = con.execute(
        SQL.sql("totals", mfu=_total("model_flops"), hfu=_total("counted_flops"), stepped=stepped)
    ).fetchone()
    mfu, hfu, hfu_ta, counted_ns, kernel_ns, kernels_counted = row
    return {
        "mfu": mfu,
        "hfu": hfu,
        "hfu_tensor_active": hfu_ta,
        "coverage_pct": _pct(counted_ns, kernel_ns),
        "kernels_counted": int(kernels_counted),
    }


def _per_step(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """One row per step over the ranks' windows of that step."""
    rows = con.execute(SQL.sql("per_step", mfu=_total("model_flops"), hfu=_total("counted_flops"))).fetchall()
    return [
        {
            "step": int(step),
            "ranks": int(n),
            "window_ns_max": int(longest),
            "mfu": mfu,
            "hfu": hfu,
            "coverage_pct": _pct(counted, kernel),
        }
        for step, n, longest, mfu, hfu, counted, kernel in rows
    ]


def _per_rank(con: duckdb.DuckDBPyConnection, stepped: str) -> list[dict[str, Any]]:
    """One row per rank over its `stepped` windows (HFU None where nothing was counted)."""
    rows = con.execute(
        SQL.sql("per_rank", mfu=_total("model_flops"), hfu=_total("counted_flops"), stepped=stepped)
    ).fetchall()
    return [
        {
            "rank": int(rank),
            "windows": int(n),
            "mfu": mfu,
            "hfu": hfu if counted_kernels else None,
            "coverage_pct": _pct(counted, kernel),
            "peak_source": source,
        }
        for rank, n, mfu, hfu, counted_kernels, counted, kernel, source in rows
    ]


def hfu_mfu_summary(
    con: duckdb.DuckDBPyConnection,
    options: MfuOptions | Mapping[str, Any] | None = None,
    *,
    window_df: pd.DataFrame | None = None,
    detail: bool = True,
    **fields: Any,
) -> dict[str, Any]:
    """MFU and HFU overall and per step, their ratio and the reasons for the gap (for summary/report).

    `options`: a MfuOptions (or a dict of its fields); its fields may also be given as keywords
    (`model_flops_per_step=...`, `gpu=...`, as `nsight-analyze mfu`'s options). `window_df`
    replaces the step windows; `detail=False` leaves per_step and per_rank empty (callers that
    read only the totals).

    Without a model description MFU is None and only HFU is reported; without a known peak
    (see `gpus`; `gpu` states the model) both are None. Never raises for missing data (only
    for an unknown `gpu` name or an incomplete model description); the `notes` say what is
    missing and how to get it.
    """
    opts = MfuOptions.of(options, **fields)
    precision = opts.precision
    notes: list[str] = []
    model: ModelFlops | None = opts.model()
    # the user's model FLOPs win; else the trace's own, where its shapes give some (op_flops)
    counted, uncounted = trace_flops(con) if model is None else (0, 0)
    trace = counted > 0
    if model is None and not trace:
        notes.append(
            "MFU needs the model FLOPs: pass --model-flops-per-step or a model description "
            "(--params, --tokens-per-step, --layers, --hidden, --seq-len)"
        )
    peaks = peaks_of(con, None, opts.peak_tflops, precision, opts.gpu)
    with rows_table(con, model, peaks, window_df, opts.n_gpus, opts.steps_in_window, trace) as win_source:
        n_rows, has_steps, n_gpus = con.execute(SQL["rows_overview"]).fetchone()
        stepped = SQL["stepped"] if has_steps else "true"
        if trace:
            model = _trace_model(con, stepped, has_steps, counted, uncounted, notes)
        totals = _totals(con, stepped)
        per_step = _per_step(con) if detail and has_steps else []
        per_rank = _per_rank(con, stepped) if detail else []
        notes += _above_peak(con, stepped, totals, per_step, per_rank)
        dcgm = dcgm_summary(
            con, lambda: con.execute(SQL.sql("stepped_rows", stepped=stepped)).df(), precision, opts.gpu
        )
    mfu, hfu, hfu_ta, coverage = (totals[k] for k in ("mfu", "hfu", "hfu_tensor_active", "coverage_pct"))
    # (the trace's own FLOPs are those of the capture window: no step count needed)
    if not has_steps and model is not None and model.formula != TRACE_FORMULA and not opts.steps_in_window:
        notes.append(
            "no step windows (no NVTX steps or detected steps): MFU needs the number of steps in "
            "the capture (--steps)"
        )
    peak_rows = [
        {k: p[k] for k in ("rank", "gpu_name", "model", "source", "reason", "peak_tflops")} for p in peaks
    ]
    told: set[tuple[Any, Any]] = set()
    for row in peak_rows:  # each (source, reason) once, in rank order
        if (row["source"], row["reason"]) in told:
            continue
        told.add((row["source"], row["reason"]))
        if row["source"] in ("assumed", "derived", "identified", "given", "unknown", "override"):
            notes.append(f"peak ({row['source']}): {row['reason']}")
    notes += _unknown_peak_notes(peaks)
    ratio = _ratio(hfu, mfu)
    summary: dict[str, Any] = {
        "precision": gpus.peaks_precision_label(precision, peaks),
        "windows": win_source,
        "n_gpus": int(n_gpus) if n_rows else opts.n_gpus,
        "model_flops": None
        if model is None
        else {
            "per_step": model.model_flops_per_step if model.inputs.get("per_step", True) else None,
            "hardware_per_step": model.hardware_flops_per_step
            if model.inputs.get("per_step", True)
            else None,
            "formula": model.formula,
            "source": MODEL_SOURCES.get(model.formula, "model description"),
            "explanation": model.explanation,
        },
        "peaks": peak_rows,
        "mfu": mfu,
        "hfu": hfu,
        "hfu_over_mfu": ratio,
        "hfu_tensor_active": hfu_ta,
        "coverage_pct": coverage,
        "per_step": per_step,
        "per_rank": per_rank,
        "gap": explain_gap(mfu, hfu, ratio, coverage, model, hfu_ta),
        "notes": notes,
    }
    notes += _range_notes(con)
    summary["dcgm"] = dcgm
    if all(p["peak_tflops"] is None for p in peaks):  # no rank's peak: the DCGM GPUs' names it (fp16 on a T4)
        summary["precision"] = gpus.precision_label(precision, [g["peak_precision"] for g in dcgm["gpus"]])
    summary["gap"] += dcgm["lines"]
    if not totals["kernels_counted"]:
        summary["hfu"] = None
        summary["hfu_over_mfu"] = None
        notes.append(
            "no counter data (Nsight Compute or CUPTI range profiler) matched the timeline kernels: HFU "
            + (
                "unavailable. This tool reads NVIDIA's FLOP counters only, and every rank ran on an "
                "AMD GPU, where Nsight Compute does not run"
                if _all_amd(con)
                else f"unavailable. Collect it with: {NCU_HINT}"
            )
        )
    return summary


def _all_amd(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether every rank's trace came from ROCm's tracer: Nsight Compute, the only counter source
    read, cannot profile those GPUs, so its command is no advice there."""
    row = con.execute(SQL.sql("all_amd", vendor=gpus.VENDOR_SQL)).fetchone()
    return bool(row and row[0])


def _above_peak(
    con: duckdb.DuckDBPyConnection,
    stepped: str,
    totals: dict[str, Any],
    per_step: list[dict[str, Any]],
    per_rank: list[dict[str, Any]],
) -> list[str]:
    """Blank MFU (HFU) everywhere when any window's is above 100 % of its peak; the notes say why.

    Why: no GPU runs above its peak, so a window whose model FLOPs (counted FLOPs) would need more
    is proof that the input is wrong for this trace: model FLOPs that are not per step or per
    --gpus, step windows that are not the steps the FLOPs describe (layers taken for steps), or
    counters matched to the wrong kernels. A total over such windows would only average the
    wrong number with others, so every value of that measure is unknown, never a number.
    """
    notes: list[str] = []
    for col, label, fix in (
        (
            "mfu",
            "MFU",
            "the model FLOPs per step are more than the GPUs can do in these windows: are they for the "
            "whole job (--gpus)? are the step windows the steps they describe (check `steps`)?",
        ),
        (
            "hfu",
            "HFU",
            "the counted FLOPs are more than the GPUs can do in these windows: counters matched to the "
            "wrong kernels, or a peak that is too low (check `gpus`)",
        ),
    ):
        over = con.execute(SQL.sql("above_peak", stepped=stepped, column=col)).fetchone()
        if not over or not over[0]:
            continue
        totals[col] = None
        for row in (*per_step, *per_rank):
            row[col] = None
        steps = over[1] or []
        where = (
            f"in step(s) {', '.join(str(int(s)) for s in steps[:10])}{' ...' if len(steps) > 10 else ''}"
            if steps
            else f"in {int(over[0])} window(s)"
        )
        notes.append(f"{label} unknown: above 100 % of the peak {where}, which no GPU can do; {fix}")
    return notes


# where the model FLOPs came from (summary["model_flops"]["source"]), by ModelFlops.formula
MODEL_SOURCES = {"given": "--model-flops-per-step", TRACE_FORMULA: "from trace shapes"}


def _trace_model(
    con: duckdb.DuckDBPyConnection,
    stepped: str,
    has_steps: bool,
    counted: int,
    uncounted: int,
    notes: list[str],
) -> ModelFlops | None:
    """The model FLOPs the rows hold from the trace's shapes (op_flops), as a ModelFlops that says
    so; None (and a note) when no counted op ran in a window.

    Why: with record_shapes the trace knows each matmul, convolution and attention op's FLOPs, so
    MFU needs no number from the user; the words say what that count includes (what ran, so a
    recomputed forward too) and leaves out (ops without a formula)."""
    total, steps, ranks = con.execute(SQL.sql("trace_model_flops", stepped=stepped)).fetchone()
    if not total:
        notes.append(
            f"the trace's shapes give the FLOPs of {counted} op(s), but none ran in a step window: MFU needs "
            "the model FLOPs (--model-flops-per-step or a model description)"
        )
        return None
    per_step = float(total) / steps if has_steps and steps else float(total)
    text = (
        f"from trace shapes: the FLOPs of {counted} matmul/convolution/attention op(s) the trace recorded "
        f"with their shapes (op_flops, docs/metrics.md), summed over {ranks} rank(s)"
        + (f": {per_step:.4g} per step" if has_steps and steps else f": {per_step:.4g} in the capture")
        + "; what ran is counted, so recomputed forward ops count too, and ops without a formula "
        "(elementwise, norms, custom kernels) do not"
    )
    if uncounted:
        text += (
            f"; {uncounted} op(s) with shapes but no FLOPs from them (e.g. attention, causal flag unknown)"
        )
    inputs = {"ops_counted": counted, "ops_uncounted": uncounted, "per_step": bool(has_steps and steps)}
    return ModelFlops(per_step, per_step, TRACE_FORMULA, text, inputs)


def _unknown_peak_notes(peaks: Peaks) -> list[str]:
    """Say which ranks MFU/HFU leave out because their peak is unknown (they are not guessed)."""
    unknown = [p["rank"] for p in peaks if p["peak_flops"] is None]
    if not unknown:
        return []
    if len(unknown) == len(peaks):
        return ["GPU peak unknown for every rank: MFU and HFU are unknown (state the GPU with --gpu NAME)"]
    ranks = ", ".join(str(int(r)) for r in unknown)
    return [f"GPU peak unknown for rank(s) {ranks}: MFU and HFU cover only the other ranks"]


def explain_gap(
    mfu: float | None,
    hfu: float | None,
    ratio: float | None,
    coverage: float | None,
    model: ModelFlops | None,
    hfu_tensor_active: float | None,
) -> list[str]:
    """Words for HFU vs MFU: coverage, recomputation, and what the residual means."""
    out: list[str] = []
    if coverage is not None and coverage < 99.0 and hfu is not None:
        out.append(
            f"HFU counts FLOPs of {coverage:.1f}% of kernel time (kernels with counter data); "
            "the rest is not counted, so HFU is a lower bound"
        )
    if ratio is not None and model is not None:
        expected = model.recompute_ratio
        if expected > 1.0:
            out.append(f"recomputation is expected to make HFU/MFU = {expected:.3f}")
        residual = ratio / expected
        if residual > 1.05:
            out.append(
                f"the remaining x{residual:.2f} is hardware work the model formula does not count: MMA tile "
                "padding (counters include padded tiles), non-matmul work (elementwise, softmax, norms, "
                "optimizer), or attention counted over the full square where the kernel does more"
            )
        elif residual < 0.95 and coverage is not None and coverage < 95.0:
            out.append(
                f"hardware counted x{residual:.2f} of the expected FLOPs, but only {coverage:.1f}% of kernel "
                "time had counters: profile the missing kernels with ncu before reading the gap"
            )
        elif residual < 0.95:
            out.append(
                f"hardware counted x{residual:.2f} of the expected FLOPs: the model description may "
                "overcount (embeddings in N, causal attention counted as full), counters for the precision "
                "used were not collected, or the ncu run used a different configuration"
            )
        else:
            out.append("HFU and MFU agree: nearly all executed FLOPs are model FLOPs")
    if hfu_tensor_active is not None:
        out.append(
            f"tensor-pipe activity (nsys GPU metrics) suggests HFU about {hfu_tensor_active:.1%}: "
            "activity is per cycle and blind to precision, a cross-check only"
        )
    return out
