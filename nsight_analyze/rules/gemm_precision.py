"""The `gemm-precision` finding: GEMMs in FP32 (CUDA cores) or TF32 on a GPU whose 16-bit tensor
cores are faster.

Why a module of its own: the bound needs the GPU's dense peaks per precision (data/gpus.csv via
`gpus`), or, with the GPU unknown, the candidate models of the architectures its kernel names run
on (rules/precision.py); the other kernel-level fixes need neither. It reads `kernel_summary` with
the `gemm_precision` name macro, never the kernels themselves, and, where the trace recorded shapes
(Kineto record_shapes: `op_flops`), the input dtypes of the ops that launched the GEMMs
(rules/_gemm_ops.py). Its fixes are offered only where the GPU takes them (rules/precision.gpu_support).
"""

from __future__ import annotations

import math
from typing import Any

from .. import gpus
from ..gpus import table as gpu_table
from ..store.query_layer import statements
from ._common import step_metrics
from ._gemm_ops import op_gemms
from .base import Ctx, Finding, Signal
from .declare import Doc, Threshold, finding
from .op_roofline import has_shapes
from .precision import ADVISED, candidate_archs, gpu_support, precision_fixes

SQL = statements("rules/gemm_precision")


def _gain(slow: float | None, fast: float | None) -> float | None:
    """1 - slow / fast: the share of the time the faster peak saves (None when one is unknown)."""
    return None if slow is None or not fast else 1 - float(slow) / float(fast)


def _ratios(ctx: Ctx) -> tuple[dict[int, dict], str, list[str]]:
    """Per rank: fp32/tf32 gain factors toward the 16-bit tensor peak, how they were found.

    Known GPU: 1 - peak_fp32 / peak_16 (and tf32), peak_16 being bf16's, else fp16's (V100, T4).
    Unknown GPU: the range over the table's NVIDIA models of the architectures its kernel names
    run on; the upper end is the bound."""
    cand_archs, seen = candidate_archs(ctx)
    cand = [
        m
        for m in gpu_table.rows()
        if m["arch"] in cand_archs and str(m["model"]).startswith(("NVIDIA", "Tesla"))
    ]
    g32 = [g for g in (_gain(m["fp32"], _p16(m["bf16"], m["fp16"])) for m in cand) if g is not None]
    gtf = [g for g in (_gain(m["tf32"], _p16(m["bf16"], m["fp16"])) for m in cand) if g is not None]
    out: dict[int, dict] = {}
    source = "table"
    models: list[str] = []
    for rec in gpus.rank_peak_rows(ctx.con):
        p16 = _p16(rec["peak_bf16_tflops"], rec["peak_fp16_tflops"])
        fp32 = _gain(rec["peak_fp32_tflops"], p16)
        if fp32 is not None:
            out[int(rec["rank"])] = {
                "fp32": fp32,
                "fp32_low": fp32,
                "tf32": _gain(rec["peak_tf32_tflops"], p16),
                "model": rec["model"],
            }
            models.append(str(rec["model"]))
            continue
        if not cand:
            continue
        out[int(rec["rank"])] = {
            "fp32": max(g32, default=math.nan),
            "fp32_low": min(g32, default=math.nan),
            "tf32": max(gtf, default=None),
            "model": None,
        }
        source = "kernel-name architectures (" + "/".join(seen) + f": {', '.join(sorted(cand_archs))})"
        models = sorted({str(m["model"]) for m in cand})
    return out, source, sorted(set(models))


def _p16(bf16: float | None, fp16: float | None) -> float | None:
    """The 16-bit tensor peak: bf16's, fp16's on a GPU without BF16 tensor cores."""
    return bf16 if bf16 is not None else fp16


def _unnamed_float_gemms(ctx: Ctx) -> list[dict]:
    """Per rank, the GEMM kernels whose names state no type (gemm_precision NULL: cuBLASLt nvjet,
    Triton) launched by an op whose first input is float (op_flops, Kineto record_shapes): rows
    (rank, precision 'float', ns, n) like the rule's per-precision rows; [] without shapes."""
    if not has_shapes(ctx, "kernels", "cuda_api"):
        return []
    return ctx.rows(
        SQL.sql(
            "unnamed_float_gemms",
            op_gemms=op_gemms(SQL["unnamed_gemms"]),
            op_precision=SQL["op_precision"],
        )
    )


def _op_dtypes(ctx: Ctx) -> tuple[Any, Signal] | None:
    """The input dtype of the ops that launched the FP32/TF32-named GEMMs (Kineto record_shapes), as
    evidence and a signal: a 16-bit op dtype contradicts the name; None without recorded shapes."""
    if not has_shapes(ctx, "kernels", "cuda_api"):
        return None
    sql = SQL.sql("op_dtypes", op_gemms=op_gemms(SQL["fp32_tf32_gemms"]), op_precision=SQL["op_precision"])
    rows = ctx.rows(sql)
    shaped = [r for r in rows if r["op_dtype"] is not None]
    if not shaped:
        return None
    total = math.fsum(float(r["kernel_ns"]) for r in shaped)
    low = math.fsum(float(r["kernel_ns"]) for r in shaped if r["op_precision"] in ("bf16", "fp16", "fp8"))
    ev = ctx.evidence(
        "op input dtypes of the FP32/TF32 GEMMs",
        "The FP32/TF32-named GEMM kernels by the input dtype of the PyTorch op that launched them "
        "(Kineto record_shapes: op_flops, the op around the launch on its thread); NULL where the op "
        "recorded no shapes.",
        sql,
    )
    pct = round(100.0 * low / total, 1) if total else None
    return ev, Signal(
        "op input dtypes",
        pct,
        "% 16-bit",
        "against" if low > 0.5 * total else "supports",
        f"{pct} % of the FP32/TF32-named GEMM time with recorded shapes was launched by ops whose "
        "inputs are 16-bit"
        + (": the kernel names and the ops disagree" if low > 0.5 * total else ": the ops take FP32 inputs"),
    )


@finding(
    "gemm-precision",
    doc=Doc(
        what=(
            "GEMMs whose names say FP32 (ffma, sgemm) or TF32 on a GPU with 16-bit tensor cores. The "
            "precision is the name's input type (`gemm_precision`: explicit type tokens, narrowest "
            "first, before MMA-shape tokens, so `..._bf16_s1688gemm_bf16` is bf16 and only a bare "
            "`s1688gemm` is TF32; AMD Tensile `Cijk_..._BBS` / `HHS` / `SB` codes; nvjet and Triton "
            "names state none); where the trace recorded shapes (Kineto `record_shapes`), the input "
            "dtype of the op that launched each GEMM (`op_flops`, the leaf matmul op around the "
            "kernel's launch on its thread): for FP32/TF32-named kernels an evidence table and a signal "
            "(`against` when the ops say 16-bit), and a kernel whose name states no type counts as "
            "FP32-or-TF32 when its op takes float inputs (`metrics.float_op_gemm_ns_total`; FP32's "
            "factor in the bound, TF32's in the low end); without shapes such kernels are not counted. "
            "Fixes only where the GPU takes them (`gpu_arch.supports`, signal `GPU capabilities`): bf16 "
            "autocast on a GPU with bf16 (CC >= 8.0, MI200/MI300), fp16 autocast with a GradScaler on "
            "one with fp16 only (V100, T4), TF32 only for FP32 GEMMs on a GPU with TF32; with the GPU "
            "unknown each fix says what it needs"
        ),
        source=(
            "`kernel_summary` x `gemm_precision(name)`, peaks of `gpus.rank_peaks` (data/gpus.csv); GPU "
            "unknown: the table's models of the architectures the kernel names run on"
        ),
        recoverable=(
            "worst rank's FP32 GEMM time x (1 - fp32/bf16 dense peak) + TF32 time x (1 - tf32/bf16), / "
            "steps; unknown GPU: the most favourable candidate (the least favourable in "
            "`metrics.recoverable_ns_per_step_low`); >= `precision_min_pct`"
        ),
    ),
    thresholds={
        "precision_min_pct": Threshold(
            1.0,
            (
                "report FP32/TF32 GEMMs when moving them to 16-bit tensor cores can recover >= this % of "
                "the mean step"
            ),
        ),
    },
    reads=("kernel_summary", "steps"),
)
def gemm_precision(ctx: Ctx) -> list[Finding]:
    """GEMMs in FP32 (CUDA cores) or TF32 on GPUs whose tensor cores run bf16/fp16 much faster."""
    if not ctx.has("kernel_summary", "gemm_precision"):
        return []
    per = ctx.rows(SQL["gemm_per_rank_precision"])
    all_gemm = math.fsum(r["ns"] for r in per)
    # names that state no type (nvjet, Triton) launched by ops whose inputs are float: FP32 or TF32
    # (which one, allow_tf32 decided; the name does not say), from the ops' recorded dtypes
    slow = [r for r in per if r["precision"] in ("fp32", "tf32")] + _unnamed_float_gemms(ctx)
    if not slow:
        return []
    ratios, source, models = _ratios(ctx)
    if not ratios:
        return []

    def factor(rk: int, precision: str, low: bool) -> float:
        """The share of a GEMM's time the 16-bit peak saves: FP32's; TF32's; for 'float' (FP32 or
        TF32) FP32's as the bound and TF32's as the low end."""
        r = ratios.get(rk, {})
        if precision == "fp32" or (precision == "float" and not low):
            return (r.get("fp32_low") if low else r.get("fp32")) or 0.0
        return r.get("tf32") or (r.get("fp32_low") if precision == "float" else 0.0) or 0.0

    def gain(r: dict) -> float:  # the row's GEMM time the 16-bit peak would save
        return float(r["ns"]) * factor(int(r["rank"]), r["precision"], False)

    by_rank = {
        rk: math.fsum(gain(r) for r in slow if r["rank"] == rk) for rk in sorted({r["rank"] for r in slow})
    }
    rec = ctx.per_step(max(by_rank.values()))
    if not rec or (ctx.pct(rec) or 0) < ctx.th["precision_min_pct"]:
        return []
    low_rank = {
        rk: math.fsum(float(r["ns"]) * factor(rk, r["precision"], True) for r in slow if r["rank"] == rk)
        for rk in by_rank
    }
    low = ctx.per_step(max(low_rank.values()))
    fp32_ns, tf32_ns, float_ns = (
        math.fsum(r["ns"] for r in slow if r["precision"] == p) for p in ("fp32", "tf32", "float")
    )
    share = round(100.0 * (fp32_ns + tf32_ns + float_ns) / all_gemm, 1) if all_gemm else None
    known = all(v["model"] for v in ratios.values())
    ev = [
        ctx.evidence(
            "GEMMs by precision",
            "GEMM kernels (name rules: subcategory gemm) by the precision their names state "
            "(gemm_precision), all ranks, whole capture (kernel_summary).",
            SQL["gemms_by_precision"],
        )
    ]
    what = (
        "FP32 or TF32 (float inputs)"
        if float_ns > max(fp32_ns, tf32_ns)
        else "FP32 (CUDA-core FFMA, no TF32)"
        if fp32_ns >= tf32_ns
        else "TF32"
    )
    support = gpu_support(ctx)
    # TF32 only helps GEMMs that may run in full FP32; a fix is offered only where the GPU takes it
    fixes = [
        f
        for f in precision_fixes(support, "the model")
        if fp32_ns + float_ns > 0 or "allow TF32" not in f.action
    ]
    dtypes = _op_dtypes(ctx)
    signals = []
    if dtypes is not None:
        ev.append(dtypes[0])
        signals.append(dtypes[1])
    f = next(iter(ratios.values()))
    return [
        ctx.finding(
            id="gemm-precision",
            title=f"GEMMs run in {what} on a GPU with 16-bit tensor cores",
            kind="performance",
            summary=f"{share} % of GEMM time is FP32/TF32 ({fp32_ns / 1e6:.3f} ms FP32, "
            f"{tf32_ns / 1e6:.3f} ms TF32"
            + (
                f", {float_ns / 1e6:.3f} ms FP32-or-TF32 by the input dtype of the ops that launched "
                "kernels whose names state no type"
                if float_ns
                else ""
            )
            + f" over all ranks). At the 16-bit tensor-core dense peak the same GEMMs would take up to "
            f"{rec / 1e6:.3f} ms less per step ({ctx.pct(rec)} % of the mean step)"
            + ("" if known else f"; GPU model unknown, {low / 1e6:.3f} ms on the least favourable candidate")
            + ".",
            ranks=sorted(int(r) for r, g in by_rank.items() if g > 0),
            steps=[],
            recoverable_ns_per_step=rec,
            recoverable_method="worst rank's FP32 GEMM time x (1 - fp32 / bf16 dense peak) + TF32 GEMM time "
            "x (1 - tf32 / bf16 peak) (+ GEMMs whose names state no type but whose ops take float inputs: "
            "FP32's factor, TF32's in the low end), / steps: the GEMMs at the same fraction of the 16-bit "
            "tensor peak "
            "(data/gpus.csv) as now of theirs; with the GPU unknown, the most favourable model of the "
            "architectures its kernel names run on (the bound), the least favourable in "
            "metrics.recoverable_ns_per_step_low",
            metrics={
                "fp32_gemm_ns_total": int(fp32_ns),
                "tf32_gemm_ns_total": int(tf32_ns),
                "float_op_gemm_ns_total": int(float_ns),
                "gemm_ns_total": int(all_gemm),
                "fp32_tf32_share_of_gemm_pct": share,
                "gain_factor_fp32": round(f["fp32"], 4),
                "gain_factor_fp32_low": round(f["fp32_low"], 4),
                "gain_factor_tf32": None if f["tf32"] is None else round(f["tf32"], 4),
                "peak_source": source,
                "gpu_models": models,
                "recoverable_ns_per_step_low": low,
                **step_metrics(ctx, [], rec, "GEMM precision is the same in every step: not listed"),
            },
            evidence=ev,
            signals=[
                Signal(
                    "GPU peaks",
                    ", ".join(models[:6]) + (" ..." if len(models) > 6 else ""),
                    "",
                    "supports" if known else "neutral",
                    f"dense peaks from {source}"
                    + ("" if known else ": pass --gpu NAME for one model's bound"),
                ),
                Signal(
                    "precision source",
                    "kernel names",
                    "",
                    "neutral",
                    "the input type the name states, explicit types before MMA shapes (gemm_precision: "
                    "ffma/sgemm = CUDA-core FP32, tf32 or a bare s1688 = TF32, bf16_s1688 = bf16); names "
                    "without one (nvjet) are not counted",
                ),
                Signal(
                    "GPU capabilities",
                    ", ".join(p for p in ADVISED if support[p]) or "unknown",
                    "",
                    "neutral",
                    f"tensor-core precisions of {support['gpu']}: the fixes offered are those it takes",
                ),
                *signals,
            ],
            fixes=fixes,
        )
    ]
