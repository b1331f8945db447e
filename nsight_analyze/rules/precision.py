"""GEMM precision: GEMMs in FP32 (CUDA cores) or TF32 on a GPU whose 16-bit tensor cores are faster.

Why a module of its own: the bound needs the GPU's dense peaks per precision (data/gpus.csv via
`gpus`), or, with the GPU unknown, the candidate models of the architectures its kernel names run
on; the other kernel-level fixes (kernel_fixes.py) need neither. It reads `kernel_summary` with the
`gemm_precision` name macro, never the kernels themselves.
"""

from __future__ import annotations

import math

from .. import gpus
from ._common import step_metrics
from .base import Ctx, Finding, Fix, Signal

_ARCH_FAMILY = {"blackwell": ("blackwell", "blackwell-consumer")}


def _gain(slow: float | None, fast: float | None) -> float | None:
    """1 - slow / fast: the share of the time the faster peak saves (None when one is unknown)."""
    return None if slow is None or not fast else 1 - float(slow) / float(fast)


def _ratios(ctx: Ctx) -> tuple[dict[int, dict], str, list[str]]:
    """Per rank: fp32/tf32 gain factors toward the 16-bit tensor peak, how they were found.

    Known GPU: 1 - peak_fp32 / peak_16 (and tf32), peak_16 being bf16's, else fp16's (V100, T4).
    Unknown GPU: the range over the table's NVIDIA models of the architectures its kernel names
    run on; the upper end is the bound."""
    fams = ctx.row(f"SELECT {gpus.families_sql()} FROM (SELECT DISTINCT name FROM kernel_summary)")
    fits = set(gpus.ARCHS)
    seen = []
    for fam, _pattern, archs in gpus.KERNEL_FAMILIES:
        if fams.get(f"fam_{fam}"):
            fits &= set(archs)
            seen.append(fam)
    cand_archs = {a for f in fits for a in _ARCH_FAMILY.get(f, (f,))} if seen else set()
    cand = [
        m for m in gpus.rows() if m["arch"] in cand_archs and str(m["model"]).startswith(("NVIDIA", "Tesla"))
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


def gemm_precision(ctx: Ctx) -> list[Finding]:
    """GEMMs in FP32 (CUDA cores) or TF32 on GPUs whose tensor cores run bf16/fp16 much faster."""
    if not ctx.has("kernel_summary", "gemm_precision"):
        return []
    per = ctx.rows(
        """SELECT rank, gemm_precision(name) AS precision, sum(total_ns) AS ns, sum(instances) AS n
           FROM kernel_summary WHERE subcategory = 'gemm' GROUP BY 1, 2"""
    )
    slow = [r for r in per if r["precision"] in ("fp32", "tf32")]
    if not slow:
        return []
    ratios, source, models = _ratios(ctx)
    if not ratios:
        return []

    def gain(r: dict) -> float:  # the row's GEMM time the 16-bit peak would save
        f = ratios.get(int(r["rank"]), {}).get(r["precision"])
        return float(r["ns"]) * f if f else 0.0

    by_rank = {
        rk: math.fsum(gain(r) for r in slow if r["rank"] == rk) for rk in sorted({r["rank"] for r in slow})
    }
    rec = ctx.per_step(max(by_rank.values()))
    if not rec or (ctx.pct(rec) or 0) < ctx.th["precision_min_pct"]:
        return []
    low_rank = {
        rk: sum(
            float(r["ns"])
            * (ratios[rk]["fp32_low"] if r["precision"] == "fp32" else (ratios[rk]["tf32"] or 0))
            for r in slow
            if r["rank"] == rk
        )
        for rk in by_rank
    }
    low = ctx.per_step(max(low_rank.values()))
    all_gemm = math.fsum(r["ns"] for r in per)
    fp32_ns, tf32_ns = (math.fsum(r["ns"] for r in slow if r["precision"] == p) for p in ("fp32", "tf32"))
    share = round(100.0 * (fp32_ns + tf32_ns) / all_gemm, 1) if all_gemm else None
    known = all(v["model"] for v in ratios.values())
    ev = [
        ctx.evidence(
            "GEMMs by precision",
            "GEMM kernels (name rules: subcategory gemm) by the precision their names state "
            "(gemm_precision), all ranks, whole capture (kernel_summary).",
            """SELECT gemm_precision(name) AS precision, name, sum(instances) AS launches,
                      sum(total_ns) AS total_ns, round(avg(avg_ns), 1) AS avg_ns,
                      list(DISTINCT rank ORDER BY rank) AS ranks
               FROM kernel_summary WHERE subcategory = 'gemm'
               GROUP BY 1, 2 ORDER BY precision IN ('fp32', 'tf32') DESC, total_ns DESC, name""",
        )
    ]
    what = "FP32 (CUDA-core FFMA, no TF32)" if fp32_ns >= tf32_ns else "TF32"
    f = next(iter(ratios.values()))
    return [
        ctx.finding(
            id="gemm-precision",
            title=f"GEMMs run in {what} on a GPU with 16-bit tensor cores",
            kind="performance",
            summary=f"{share} % of GEMM time is FP32/TF32 ({fp32_ns / 1e6:.3f} ms FP32, "
            f"{tf32_ns / 1e6:.3f} ms "
            f"TF32 over all ranks). At the 16-bit tensor-core dense peak the same GEMMs would take up to "
            f"{rec / 1e6:.3f} ms less per step ({ctx.pct(rec)} % of the mean step)"
            + ("" if known else f"; GPU model unknown, {low / 1e6:.3f} ms on the least favourable candidate")
            + ".",
            ranks=sorted(int(r) for r, g in by_rank.items() if g > 0),
            steps=[],
            recoverable_ns_per_step=rec,
            recoverable_method="worst rank's FP32 GEMM time x (1 - fp32 / bf16 dense peak) + TF32 GEMM time "
            "x (1 - tf32 / bf16 peak), / steps: the GEMMs at the same fraction of the 16-bit tensor peak "
            "(data/gpus.csv) as now of theirs; with the GPU unknown, the most favourable model of the "
            "architectures its kernel names run on (the bound), the least favourable in "
            "metrics.recoverable_ns_per_step_low",
            metrics={
                "fp32_gemm_ns_total": int(fp32_ns),
                "tf32_gemm_ns_total": int(tf32_ns),
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
                    "cuBLAS/xmma names state input/compute types (ffma = CUDA-core FP32, tf32/s1688 = "
                    "TF32); names without a marker (nvjet) are not counted",
                ),
            ],
            fixes=[
                Fix(
                    "Run the model under torch.autocast(dtype=torch.bfloat16) (or keep weights in bf16)",
                    "8-bit mantissa: validate accuracy/convergence; keep reductions, softmax and the "
                    "loss in FP32 (autocast does); fp16 instead of bf16 needs loss scaling",
                ),
                Fix(
                    "At least allow TF32: torch.backends.cuda.matmul.allow_tf32 = True / "
                    "torch.set_float32_matmul_precision('high')",
                    "10-bit mantissa in the products (FP32 accumulate): usually harmless for training, "
                    "not for code that needs full FP32 (solvers, some losses); about half the bf16 rate",
                ),
            ],
        )
    ]
