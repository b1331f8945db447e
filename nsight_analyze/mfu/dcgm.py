"""DCGM's tensor-pipe HFU estimate, set beside nsys' GPU metrics and the counters, never instead.

Why a module of its own: production scrapes (dcgm-exporter) often come without traces, so this
part reads `gpu_metrics` per DCGM GPU as well as per rank window; mfu/__init__.py's summary adds its
lines to the gap explanation. The aggregations are SQL (queries/mfu/dcgm.sql); Python loops over
GPUs (one aggregate row each), never over samples.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import duckdb

from .. import gpus
from ..gpus import table as gpu_table
from ..gpus.table import DEFAULT_PRECISION
from ..store.query_layer import statements

if TYPE_CHECKING:  # DataFrames only where DCGM samples are (`mfu` of a trace without imports no pandas)
    import pandas as pd

SQL = statements("mfu/dcgm")


def ratio(num: float | None, den: float | None) -> float | None:
    """num / den, or None when either is unknown or den is 0."""
    if num is None or den is None or den == 0 or any(math.isnan(x) for x in (num, den)):
        return None
    return num / den


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
    hfu_rows: pd.DataFrame | Callable[[], pd.DataFrame],
    precision: str = DEFAULT_PRECISION,
    gpu: str | None = None,
) -> dict[str, Any]:
    """DCGM's tensor-pipe HFU estimate beside the other sources, never instead of them.

    * per rank window (`hfu_rows` from hfu_table, or a function returning them, called only when
      there are DCGM samples: DCGM samples of the rank's GPU inside it): the
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
    if callable(hfu_rows):
        hfu_rows = hfu_rows()
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
                dcgm_over_nsys_tensor_active=ratio(dcgm_pct, nsys_pct),
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
            out.update(estimated_flops=est, counted_flops=cnt, estimated_over_counted_flops=ratio(est, cnt))
            over = out["estimated_over_counted_flops"]
            lines.append(
                f"FLOPs over the same {len(counted)} window(s): DCGM estimate {est:.3g}, counters {cnt:.3g}"
                + (f" (estimate/counted = {over:.2f})" if over is not None else "")
                + "; counters cover only kernels with counter data"
            )
        if out["hfu_estimate"] is not None:
            lines.append(
                f"DCGM tensor-pipe activity suggests HFU about {out['hfu_estimate']:.1%} over "
                f"{len(d)} rank window(s) ({DCGM_ESTIMATE})"
            )
    per_gpu = con.execute(SQL["dcgm_gpus"]).df()
    for rec in per_gpu.to_dict("records"):  # one row per GPU (an aggregate), not per sample
        rec = {k: gpus.plain_value(v) for k, v in rec.items()}
        peak = gpu_table.given_peak(gpu) if gpu else gpu_table.lookup(rec["gpu_name"])
        flops = peak.peak_flops(precision) if peak is not None and rec["gpu_instance"] is None else None
        ref = None if peak is None else (peak.tensor_mhz or peak.boost_mhz)
        scale = rec["sm_mhz"] / ref if rec["sm_mhz"] and ref else 1.0
        est = rec["tensor_active"] * scale
        rec.update(
            hfu_estimate=est,
            estimated_tflops=None if flops is None else est * flops / 1e12,
            peak_tflops=None if flops is None else flops / 1e12,
            peak_model=None if peak is None else peak.model,
            peak_precision=None if flops is None else peak.precision_of(precision),  # fp16 on a T4
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
                f", about {g['estimated_tflops']:.0f} of {g['peak_tflops']:.0f} dense "
                f"{g['peak_precision']} TFLOP/s"
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
    # GPUs sampled without the tensor-pipe field: said, not left out silently
    blind = con.execute(SQL["dcgm_blind_gpus"]).fetchone()
    if blind[0]:
        lines.append(f"DCGM: {blind[0]} GPU(s) on {', '.join(blind[1][:4])} were sampled without "
                     "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE: no HFU estimate for them (add the DCGM_FI_PROF_* "
                     "fields to dcgm-exporter's counters)")  # fmt: skip
    return out
