"""MFU and HFU per rank and step, side by side, with what explains the gap.

* MFU = model FLOPs per GPU per step / (step window x dense peak): how much of the GPU the
  *model* used; comparable across implementations (nsight_analyze.flops says how the
  model FLOPs were counted).
* HFU = FLOPs the hardware counted (`kernel_flops`: Nsight Compute, or the PyTorch profiler's
  CUPTI range profiler; joined to the timeline by `hfu_timeline_flops`) / (window x dense peak):
  recomputation, padding and non-model work
  included. It covers only timeline kernels that had counter data, so the share of kernel
  time with counters (`coverage_pct`) is always printed beside it.
* Where nsys sampled GPU metrics, a tensor-pipe-activity estimate is shown as a cross-check
  (per-cycle and precision-blind, so never the headline).

Windows come from the `steps` view (other engineers' time partition) when it exists, else the
whole capture per rank, else windows passed in. Peaks come from nsight_analyze.gpus; a rank whose
peak is unknown (GPU not recorded and not stated with --gpu) has MFU/HFU unknown, never guessed.
The computations are SQL; Python only assembles parameters and words.
"""

from __future__ import annotations

import math
from typing import Any

import duckdb
import pandas as pd

from . import gpus
from .flops import ModelFlops, model_flops
from .gpus import DEFAULT_PRECISION

NCU_HINT = (
    "ncu --metrics sm__sass_thread_inst_executed_op_fadd_pred_on.sum,"
    "sm__sass_thread_inst_executed_op_fmul_pred_on.sum,"
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__ops_path_tensor_src_bf16_dst_fp32.sum,"
    "sm__ops_path_tensor_src_fp16_dst_fp32.sum,dram__bytes.sum,gpu__time_duration.sum "
    "--launch-skip 200 --launch-count 400 --csv --page raw -o ... (then ingest the CSV beside the nsys files)"
)


def _exists(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    row = con.execute(
        "SELECT (SELECT count(*) FROM duckdb_views() WHERE view_name = $n)"
        " + (SELECT count(*) FROM duckdb_tables() WHERE table_name = $n)",
        {"n": name},
    ).fetchone()
    return bool(row and row[0])


def windows(con: duckdb.DuckDBPyConnection, given: pd.DataFrame | None = None) -> tuple[pd.DataFrame, str]:
    """(rank, step, start_ns, end_ns) windows and where they came from.

    `given` (same columns) wins; then the `steps` view; then the whole capture of each rank.
    """
    cols = ["rank", "step", "start_ns", "end_ns"]
    if given is not None:
        df = given.copy()
        if "step" not in df.columns:
            df["step"] = None
        return df[cols], "given"
    if _exists(con, "steps"):
        df = con.execute("SELECT rank, step, start_ns, end_ns, source FROM steps ORDER BY rank, step").df()
        if len(df):
            sources = sorted(set(df["source"].dropna()))
            return df[cols], "steps (" + ", ".join(sources) + ")"
    df = con.execute(
        """
        SELECT rank, NULL::BIGINT AS step, min(start_ns) AS start_ns, max(end_ns) AS end_ns
        FROM (SELECT rank, start_ns, end_ns FROM kernels UNION ALL SELECT rank, start_ns, end_ns FROM memops)
        GROUP BY rank ORDER BY rank
        """
    ).df()
    return df, "capture"


def n_gpus_of(con: duckdb.DuckDBPyConnection) -> int:
    """World size recorded in the traces, else the number of ranks in the workspace."""
    row = con.execute("SELECT max(world_size), count(*) FROM ranks").fetchone()
    if row is None:
        return 0
    return int(row[0] or row[1] or 0)


def _peaks(
    con: duckdb.DuckDBPyConnection,
    peaks: pd.DataFrame | None,
    peak_tflops: float | None,
    precision: str,
    gpu: str | None = None,
) -> pd.DataFrame:
    """Per-rank peaks (given, else resolved) with the clock the tensor-active estimate scales by."""
    if peaks is None:
        peaks = gpus.rank_peaks(con, peak_tflops=peak_tflops, precision=precision, gpu=gpu)
    peaks = peaks.copy()
    peaks["clock_ref_mhz"] = peaks["tensor_mhz"].where(peaks["tensor_mhz"].notna(), peaks["boost_mhz"])
    return peaks


# per window: the kernels, their time and what the counters counted (FLOPs joined per kernel)
_HFU_AGG_SCAN = """k AS (
    SELECT rank, start_ns, duration_ns, flops, tensor_flops, coalesce(category = 'comms', false) AS is_comms
    FROM {kernels}
),
agg AS (
    SELECT w.rank, w.step, w.start_ns, w.end_ns,
        count(k.start_ns) FILTER (WHERE NOT k.is_comms) AS kernels,
        count(k.flops) FILTER (WHERE NOT k.is_comms) AS kernels_counted,
        coalesce(sum(k.duration_ns) FILTER (WHERE NOT k.is_comms), 0) AS kernel_ns,
        coalesce(sum(k.duration_ns) FILTER (WHERE NOT k.is_comms AND k.flops IS NOT NULL), 0) AS counted_ns,
        sum(k.flops) AS counted_flops,
        sum(k.tensor_flops) AS tensor_flops
    FROM w LEFT JOIN k ON k.rank = w.rank AND k.start_ns >= w.start_ns AND k.start_ns < w.end_ns
    GROUP BY ALL
)"""

# no counter data, `steps` windows: the stored kernel totals (hfu_window_kernels), nothing counted
_HFU_AGG_STORED = """agg AS (SELECT w.rank, w.step, w.start_ns, w.end_ns, coalesce(h.kernels, 0) AS kernels,
    0::BIGINT AS kernels_counted, coalesce(h.kernel_ns, 0::HUGEINT) AS kernel_ns, 0::HUGEINT AS counted_ns,
    NULL::DOUBLE AS counted_flops, NULL::DOUBLE AS tensor_flops FROM w LEFT JOIN hfu_window_kernels h
    ON h.rank = w.rank AND h.step IS NOT DISTINCT FROM w.step AND h.start_ns = w.start_ns)"""

_WINDOWS_NOT_STORED = """SELECT count(*) FROM _hfu_windows w ANTI JOIN hfu_window_kernels h ON h.rank = w.rank
    AND h.step IS NOT DISTINCT FROM w.step AND h.start_ns = w.start_ns AND h.end_ns = w.end_ns"""

_HFU_SQL = """
WITH w AS (SELECT rank, step, start_ns, end_ns FROM _hfu_windows),
{agg},
gm AS (
    SELECT w.rank, w.step,
        avg(g.value) FILTER (WHERE g.metric_name ILIKE 'Tensor Active%') AS tensor_active_pct,
        avg(g.value) FILTER (WHERE g.metric_name ILIKE 'GPC Clock Frequency%') AS gpc_mhz,
        -- DCGM samples of the rank's GPU (sources/dcgm.match_ranks): ratio 0-1 -> %
        100.0 * avg(g.value) FILTER (WHERE g.metric_name = 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE')
            AS dcgm_tensor_active_pct,
        count(*) FILTER (WHERE g.metric_name = 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE') AS dcgm_samples,
        avg(g.value) FILTER (WHERE g.metric_name = 'DCGM_FI_DEV_SM_CLOCK') AS dcgm_sm_mhz
    FROM w JOIN gpu_metrics g
        ON g.rank = w.rank AND g.timestamp_ns >= w.start_ns AND g.timestamp_ns < w.end_ns
    GROUP BY ALL
)
SELECT a.rank, a.step, a.start_ns, a.end_ns, (a.end_ns - a.start_ns) AS window_ns,
    a.kernels, a.kernels_counted, a.kernel_ns, a.counted_ns,
    CASE WHEN a.kernel_ns > 0 THEN 100.0 * a.counted_ns / a.kernel_ns END AS coverage_pct,
    a.counted_flops, a.tensor_flops,
    p.peak_flops, p.source AS peak_source,
    a.counted_flops / nullif((a.end_ns - a.start_ns) * 1e-9 * p.peak_flops, 0) AS hfu,
    gm.tensor_active_pct, gm.gpc_mhz,
    gm.tensor_active_pct / 100.0 * coalesce(gm.gpc_mhz / nullif(p.clock_ref_mhz, 0), 1.0)
        AS hfu_tensor_active,
    gm.dcgm_tensor_active_pct, coalesce(gm.dcgm_samples, 0) AS dcgm_samples,
    -- an estimate: tensor-pipe activity x dense peak (precision-blind, clock-scaled)
    gm.dcgm_tensor_active_pct / 100.0 * coalesce(gm.dcgm_sm_mhz / nullif(p.clock_ref_mhz, 0), 1.0)
        AS hfu_dcgm_estimate,
    gm.dcgm_tensor_active_pct / 100.0 * coalesce(gm.dcgm_sm_mhz / nullif(p.clock_ref_mhz, 0), 1.0)
        * (a.end_ns - a.start_ns) * 1e-9 * p.peak_flops AS dcgm_estimated_flops,
    gm.dcgm_tensor_active_pct / nullif(gm.tensor_active_pct, 0) AS dcgm_over_nsys_tensor_active
FROM agg a
LEFT JOIN _hfu_peaks p ON p.rank = a.rank
LEFT JOIN gm ON gm.rank = a.rank AND gm.step IS NOT DISTINCT FROM a.step
ORDER BY a.rank, a.step NULLS FIRST
"""


def _counter_kernels(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """(Nsight Compute launches, CUPTI range-profiler kernels) in the workspace."""
    row = con.execute(
        "SELECT (SELECT count(*) FROM ncu_kernels), (SELECT count(*) FROM kineto_profiler_ranges)"
    ).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def _range_notes(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Say how many CUPTI range-profiler kernels could not be placed on the timeline, and why."""
    if not _counter_kernels(con)[1]:
        return []
    rows = con.execute(
        "SELECT status, count(*), count(DISTINCT rank) FROM cupti_range_joins WHERE status <> 'joined' "
        "GROUP BY status ORDER BY count(*) DESC"
    ).fetchall()
    return [
        f"{n} CUPTI range-profiler kernels of {ranks} rank(s) are not on the timeline ({status}): their "
        "FLOPs are in kernel_flops but not in HFU"
        for status, n, ranks in rows
    ]


def _kernel_source(con: duckdb.DuckDBPyConnection) -> str:
    """hfu_timeline_flops when there is counter data to match; else the bare kernels (fast path)."""
    if any(_counter_kernels(con)):
        return "hfu_timeline_flops"
    return (
        "(SELECT rank, start_ns, duration_ns, category, NULL::DOUBLE AS flops, NULL::DOUBLE AS tensor_flops"
        " FROM kernels)"
    )


def hfu_table(
    con: duckdb.DuckDBPyConnection,
    peaks: pd.DataFrame | None = None,
    window_df: pd.DataFrame | None = None,
    peak_tflops: float | None = None,
    precision: str = DEFAULT_PRECISION,
    gpu: str | None = None,
) -> pd.DataFrame:
    """Counter-based HFU per rank and window (a kernel belongs to the window its start is in)."""
    wins, _source = windows(con, window_df)
    peaks = _peaks(con, peaks, peak_tflops, precision, gpu)
    con.register("_hfu_windows", wins)
    con.register("_hfu_peaks", peaks[["rank", "peak_flops", "source", "clock_ref_mhz"]])
    try:  # the stored totals only when nothing was counted and every window is a stored one
        stored = not any(_counter_kernels(con)) and _exists(con, "hfu_window_kernels")
        stored = stored and not con.execute(_WINDOWS_NOT_STORED).fetchone()[0]
        agg = _HFU_AGG_STORED if stored else _HFU_AGG_SCAN.format(kernels=_kernel_source(con))
        return con.execute(_HFU_SQL.format(agg=agg)).df()
    finally:
        con.unregister("_hfu_windows")
        con.unregister("_hfu_peaks")


def hfu_mfu_table(
    con: duckdb.DuckDBPyConnection,
    model: ModelFlops | None,
    peaks: pd.DataFrame | None = None,
    window_df: pd.DataFrame | None = None,
    peak_tflops: float | None = None,
    precision: str = DEFAULT_PRECISION,
    n_gpus: int | None = None,
    steps_in_window: int | None = None,
    gpu: str | None = None,
) -> pd.DataFrame:
    """Per rank and window: MFU and HFU side by side (NaN where the rank's peak is unknown).

    A step window of rank r gets model_flops_per_step / n_gpus (data/tensor/pipeline
    parallel ranks share a step's work evenly on average); a whole-capture window gets
    that times `steps_in_window` when given, else no MFU.
    """
    peaks = _peaks(con, peaks, peak_tflops, precision, gpu)
    df = hfu_table(con, peaks, window_df, precision=precision)
    world = n_gpus or n_gpus_of(con) or 1
    df["n_gpus"] = world
    if model is None:
        df["model_flops"] = math.nan
    else:
        per_gpu = model.model_flops_per_step / world
        steps = df["step"].notna().astype(float)
        if steps_in_window:
            steps = steps.where(df["step"].notna(), float(steps_in_window))
        df["model_flops"] = (per_gpu * steps).where(steps > 0)
    denom = df["window_ns"] * 1e-9 * df["peak_flops"]
    df["mfu"] = df["model_flops"] / denom
    df["hfu_over_mfu"] = df["hfu"] / df["mfu"]
    return df


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den == 0 or any(math.isnan(x) for x in (num, den)):
        return None
    return num / den


def _total(df: pd.DataFrame, column: str) -> float | None:
    """Σ column / Σ (window x peak) over rows where both are known: GPU-time weighted."""
    ok = df[column].notna() & df["peak_flops"].notna() & (df["window_ns"] > 0)
    if not ok.any():
        return None
    return float(df.loc[ok, column].sum() / (df.loc[ok, "window_ns"] * 1e-9 * df.loc[ok, "peak_flops"]).sum())


def hfu_mfu_summary(
    con: duckdb.DuckDBPyConnection,
    model_flops_per_step: float | None = None,
    params: float | None = None,
    tokens_per_step: float | None = None,
    layers: int | None = None,
    hidden: int | None = None,
    seq_len: int | None = None,
    vocab: int | None = None,
    recompute: str = "none",
    formula: str = "palm",
    peak_tflops: float | None = None,
    precision: str = DEFAULT_PRECISION,
    n_gpus: int | None = None,
    window_df: pd.DataFrame | None = None,
    steps_in_window: int | None = None,
    gpu: str | None = None,
    detail: bool = True,
) -> dict[str, Any]:
    """MFU and HFU overall and per step, their ratio and the reasons for the gap (for summary/report).
    `detail=False` leaves per_step and per_rank empty (callers that read only the totals).

    Without a model description MFU is None and only HFU is reported; without a known peak
    (see `gpus`; `gpu` states the model) both are None. Never raises for missing data (only
    for an unknown `gpu` name); the `notes` say what is missing and how to get it.
    """
    model: ModelFlops | None = None
    notes: list[str] = []
    if model_flops_per_step is not None or tokens_per_step is not None:
        model = model_flops(
            model_flops_per_step, params, tokens_per_step, layers, hidden, seq_len, vocab, recompute, formula
        )
    else:
        notes.append(
            "MFU needs the model FLOPs: pass --model-flops-per-step or a model description "
            "(--params, --tokens-per-step, --layers, --hidden, --seq-len)"
        )
    peaks = _peaks(con, None, peak_tflops, precision, gpu)
    wins, win_source = windows(con, window_df)
    df = hfu_mfu_table(
        con, model, peaks, wins, precision=precision, n_gpus=n_gpus, steps_in_window=steps_in_window
    )
    stepped = df[df["step"].notna()] if df["step"].notna().any() else df
    mfu = _total(stepped, "model_flops")
    hfu = _total(stepped, "counted_flops")
    ta = stepped.dropna(subset=["hfu_tensor_active"])
    hfu_ta = None
    if len(ta):
        weights = ta["window_ns"]
        hfu_ta = float((ta["hfu_tensor_active"] * weights).sum() / weights.sum())
    kernel_ns = float(stepped["kernel_ns"].sum())
    coverage = 100.0 * float(stepped["counted_ns"].sum()) / kernel_ns if kernel_ns > 0 else None
    per_step = []
    if detail and df["step"].notna().any():
        grouped = df[df["step"].notna()].groupby("step", sort=True)
        for step, g in grouped:
            per_step.append(
                {
                    "step": int(step),
                    "ranks": int(len(g)),
                    "window_ns_max": int(g["window_ns"].max()),
                    "mfu": _total(g, "model_flops"),
                    "hfu": _total(g, "counted_flops"),
                    "coverage_pct": (
                        100.0 * float(g["counted_ns"].sum()) / float(g["kernel_ns"].sum())
                        if float(g["kernel_ns"].sum()) > 0
                        else None
                    ),
                }
            )
    per_rank = []
    for rank, g in stepped.groupby("rank", sort=True) if detail else ():
        kns = float(g["kernel_ns"].sum())
        per_rank.append(
            {
                "rank": int(rank),
                "windows": int(len(g)),
                "mfu": _total(g, "model_flops"),
                "hfu": _total(g, "counted_flops") if g["kernels_counted"].sum() else None,
                "coverage_pct": 100.0 * float(g["counted_ns"].sum()) / kns if kns > 0 else None,
                "peak_source": gpus._none(g["peak_source"].iloc[0]),
            }
        )
    if not df["step"].notna().any() and model is not None and not steps_in_window:
        notes.append(
            "no step windows (no NVTX steps or detected steps): MFU needs the number of steps in "
            "the capture (--steps)"
        )
    peak_rows = peaks[["rank", "gpu_name", "model", "source", "reason", "peak_tflops"]]
    for row in peak_rows.drop_duplicates(["source", "reason"]).to_dict("records"):
        if row["source"] in ("assumed", "derived", "given", "unknown", "override"):
            notes.append(f"peak ({row['source']}): {row['reason']}")
    notes += _unknown_peak_notes(peaks)
    if mfu is not None and mfu > 1.0:
        notes.append(
            f"MFU {mfu:.0%} is above 100%: the model FLOPs are too high for these windows (are they for the "
            "whole job? is --gpus right?) or the step windows are not training steps (check `steps`)"
        )
    ratio = _ratio(hfu, mfu)
    summary: dict[str, Any] = {
        "precision": precision,
        "windows": win_source,
        "n_gpus": int(df["n_gpus"].iloc[0]) if len(df) else n_gpus,
        "model_flops": None
        if model is None
        else {
            "per_step": model.model_flops_per_step,
            "hardware_per_step": model.hardware_flops_per_step,
            "formula": model.formula,
            "explanation": model.explanation,
        },
        "peaks": [{k: gpus._none(v) for k, v in r.items()} for r in peak_rows.to_dict("records")],
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
    summary["dcgm"] = dcgm_summary(con, stepped, precision, gpu)
    summary["gap"] += summary["dcgm"]["lines"]
    if not stepped["kernels_counted"].sum():
        summary["hfu"] = None
        summary["hfu_over_mfu"] = None
        notes.append(
            "no counter data (Nsight Compute or CUPTI range profiler) matched the timeline kernels: HFU "
            f"unavailable. Collect it with: {NCU_HINT}"
        )
    return summary


def _unknown_peak_notes(peaks: pd.DataFrame) -> list[str]:
    """Say which ranks MFU/HFU leave out because their peak is unknown (they are not guessed)."""
    unknown = peaks.loc[peaks["peak_flops"].isna(), "rank"]
    if not len(unknown):
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


DCGM_ESTIMATE = (
    "estimates: DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, scaled by SM clock / the peak's clock, x dense peak; they "
    "assume the active tensor pipe runs at its dense rate in the chosen precision and are blind to "
    "precision and idle lanes"
)


def _weighted(df: pd.DataFrame, column: str) -> float | None:
    ok = df[df[column].notna()]
    if not len(ok) or not ok["window_ns"].sum():
        return None
    return float((ok[column] * ok["window_ns"]).sum() / ok["window_ns"].sum())


def dcgm_summary(
    con: duckdb.DuckDBPyConnection,
    hfu_rows: pd.DataFrame,
    precision: str = DEFAULT_PRECISION,
    gpu: str | None = None,
) -> dict[str, Any]:
    """DCGM's tensor-pipe HFU estimate beside the other sources, never instead of them.

    * per rank window (`hfu_rows` from hfu_table: DCGM samples of the rank's GPU inside it): the
      estimate, and where nsys also sampled tensor activity or counters counted FLOPs, both values
      and their ratio;
    * per DCGM GPU, matched to a rank or not (production scrapes without traces): mean tensor-pipe
      activity, the HFU estimate and the TFLOP/s it implies with the dense peak of the GPU's
      modelName (or --gpu).
    """
    out: dict[str, Any] = {
        "hfu_estimate": None,
        "nsys_tensor_active_pct": None,
        "dcgm_tensor_active_pct": None,
        "dcgm_over_nsys_tensor_active": None,
        "estimated_flops": None,
        "counted_flops": None,
        "estimated_over_counted_flops": None,
        "gpus": [],
        "lines": [],
    }
    n = con.execute("SELECT count(*) FROM gpu_metrics WHERE source = 'dcgm'").fetchone()[0]
    if not n:
        return out
    lines: list[str] = out["lines"]
    d = hfu_rows[hfu_rows["dcgm_samples"] > 0] if "dcgm_samples" in hfu_rows else hfu_rows.iloc[0:0]
    if len(d):
        out["hfu_estimate"] = _weighted(d, "hfu_dcgm_estimate")
        both = d.dropna(subset=["tensor_active_pct", "dcgm_tensor_active_pct"])
        if len(both):
            nsys_pct = _weighted(both, "tensor_active_pct")
            dcgm_pct = _weighted(both, "dcgm_tensor_active_pct")
            out.update(
                nsys_tensor_active_pct=nsys_pct,
                dcgm_tensor_active_pct=dcgm_pct,
                dcgm_over_nsys_tensor_active=_ratio(dcgm_pct, nsys_pct),
            )
            lines.append(
                f"tensor-pipe activity over the same {len(both)} window(s): nsys {nsys_pct:.1f}%, DCGM "
                f"{dcgm_pct:.1f}% (DCGM/nsys = {out['dcgm_over_nsys_tensor_active']:.2f}); both shown, "
                "neither preferred"
                if out["dcgm_over_nsys_tensor_active"] is not None
                else f"tensor-pipe activity over the same {len(both)} window(s): nsys {nsys_pct:.1f}%, "
                f"DCGM {dcgm_pct:.1f}%"
            )
        known = d["dcgm_estimated_flops"].notna() & d["counted_flops"].notna()
        counted = d[(d["kernels_counted"] > 0) & known]
        if len(counted):
            est, cnt = float(counted["dcgm_estimated_flops"].sum()), float(counted["counted_flops"].sum())
            out.update(estimated_flops=est, counted_flops=cnt, estimated_over_counted_flops=_ratio(est, cnt))
            ratio = out["estimated_over_counted_flops"]
            lines.append(
                f"FLOPs over the same {len(counted)} window(s): DCGM estimate {est:.3g}, counters {cnt:.3g}"
                + (f" (estimate/counted = {ratio:.2f})" if ratio is not None else "")
                + "; counters cover only kernels with counter data"
            )
        if out["hfu_estimate"] is not None:
            lines.append(
                f"DCGM tensor-pipe activity suggests HFU about {out['hfu_estimate']:.1%} over "
                f"{len(d)} rank window(s) ({DCGM_ESTIMATE})"
            )
    per_gpu = con.execute(
        """SELECT host, gpu_id, gpu_uuid, gpu_instance, any_value(gpu_name) AS gpu_name, min(rank) AS rank,
                  avg(value) FILTER (WHERE metric_name = 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE') AS tensor_active,
                  count(*) FILTER (WHERE metric_name = 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE') AS samples,
                  avg(value) FILTER (WHERE metric_name = 'DCGM_FI_DEV_SM_CLOCK') AS sm_mhz,
                  min(utc_ns) AS first_utc_ns, max(utc_ns) AS last_utc_ns
           FROM gpu_metrics WHERE source = 'dcgm'
           GROUP BY host, gpu_id, gpu_uuid, gpu_instance
           HAVING count(*) FILTER (WHERE metric_name = 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE') > 0
           ORDER BY host NULLS LAST, gpu_id, gpu_instance NULLS FIRST"""
    ).df()
    for rec in per_gpu.to_dict("records"):  # one row per GPU (an aggregate), not per sample
        rec = {k: gpus._none(v) for k, v in rec.items()}
        peak = gpus.given_peak(gpu) if gpu else gpus.lookup(rec["gpu_name"])
        flops = peak.peak_flops(precision) if peak is not None and rec["gpu_instance"] is None else None
        ref = None if peak is None else (peak.tensor_mhz or peak.boost_mhz)
        scale = rec["sm_mhz"] / ref if rec["sm_mhz"] and ref else 1.0
        est = rec["tensor_active"] * scale
        rec.update(
            hfu_estimate=est,
            estimated_tflops=None if flops is None else est * flops / 1e12,
            peak_tflops=None if flops is None else flops / 1e12,
            peak_model=None if peak is None else peak.model,
            clock_scaled=bool(rec["sm_mhz"] and ref),
        )
        out["gpus"].append(rec)
    if out["gpus"]:
        shown = out["gpus"][:8]
        for g in shown:
            name = f"{g['host'] or 'host?'} GPU {g['gpu_id'] if g['gpu_id'] is not None else '?'}" + (
                f" MIG {g['gpu_instance']}" if g["gpu_instance"] is not None else ""
            )
            rank = f", rank {g['rank']}" if g["rank"] is not None else ""
            tflops = (
                f", about {g['estimated_tflops']:.0f} of {g['peak_tflops']:.0f} dense {precision} TFLOP/s"
                if g["estimated_tflops"] is not None
                else (
                    " (MIG instance: share of its slice, no peak)"
                    if g["gpu_instance"] is not None
                    else " (peak unknown: no modelName; state it with --gpu)"
                )
            )
            lines.append(
                f"DCGM {name}{rank}: tensor pipe active {100 * g['tensor_active']:.1f}% over {g['samples']} "
                f"sample(s): HFU estimate {g['hfu_estimate']:.1%}{tflops}"
            )
        if len(out["gpus"]) > len(shown):
            vals = [g["hfu_estimate"] for g in out["gpus"]]
            lines.append(
                f"... and {len(out['gpus']) - len(shown)} more DCGM GPUs (all {len(vals)}: HFU estimate "
                f"{min(vals):.1%}-{max(vals):.1%}, mean {sum(vals) / len(vals):.1%})"
            )
        if out["hfu_estimate"] is None:
            lines.append(f"DCGM HFU figures are {DCGM_ESTIMATE}")
    blind = con.execute(  # GPUs sampled without the tensor-pipe field: said, not left out silently
        """SELECT count(*), list(DISTINCT h ORDER BY h) FROM (SELECT coalesce(host, 'host?') AS h
           FROM gpu_metrics WHERE source = 'dcgm' GROUP BY host, gpu_id, gpu_uuid, gpu_instance
           HAVING count(*) FILTER (WHERE metric_name = 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE') = 0)"""
    ).fetchone()
    if blind[0]:
        lines.append(f"DCGM: {blind[0]} GPU(s) on {', '.join(blind[1][:4])} were sampled without "
                     "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE: no HFU estimate for them (add the DCGM_FI_PROF_* "
                     "fields to dcgm-exporter's counters)")  # fmt: skip
    return out
