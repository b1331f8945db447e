"""GEMM precision and alignment: GEMMs in FP32 (CUDA cores) or TF32 on a GPU whose 16-bit tensor
cores are faster, GEMM kernels built for unaligned operands, and what the GPU can take.

Why a module of its own: the bound needs the GPU's dense peaks per precision (data/gpus.csv via
`gpus`), or, with the GPU unknown, the candidate models of the architectures its kernel names run
on; the other kernel-level fixes (kernel_fixes.py) need neither. It reads `kernel_summary` with the
`gemm_precision` and `gemm_alignment` name macros, never the kernels themselves, and, where the
trace recorded shapes (Kineto record_shapes: `op_flops`), the input dtypes and sizes of the ops
that launched the GEMMs. `gpu_support` says which precisions the job's GPUs take (gpu_arch.supports,
the one table of capabilities): every fix that advises bf16, TF32 or FP8 is offered only where the
GPU takes it, and says what it needs where the GPU is unknown.
"""

from __future__ import annotations

import math
from typing import Any

from .. import gpu_arch, gpus
from ._common import step_metrics
from .base import Ctx, Finding, Fix, Signal
from .op_roofline import has_shapes

_ARCH_FAMILY = {"blackwell": ("blackwell", "blackwell-consumer")}
#: Tensor-core precisions a fix may advise (gpu_arch.ARCH_PRECISIONS).
ADVISED = ("tf32", "bf16", "fp16", "fp8")


def _candidate_archs(ctx: Ctx) -> tuple[set[str], list[str]]:
    """The architectures every GPU-specific kernel-name family of the job runs on, and the families."""
    fams = ctx.row(f"SELECT {gpus.families_sql()} FROM (SELECT DISTINCT name FROM kernel_summary)")
    fits = set(gpus.ARCHS)
    seen = []
    for fam, _pattern, archs in gpus.KERNEL_FAMILIES:
        if fams.get(f"fam_{fam}"):
            fits &= set(archs)
            seen.append(fam)
    return ({a for f in fits for a in _ARCH_FAMILY.get(f, (f,))} if seen else set()), seen


def gpu_support(ctx: Ctx) -> dict[str, Any]:
    """Which tensor-core precisions (ADVISED) the job's GPUs take: {precision: True | False | None,
    'gpu': what the answer rests on}. True / False when every rank's GPU agrees, None when the GPU
    is unknown or the ranks differ.

    Per rank: the architecture of its peak-table model (the GPU name, --gpu, or its identified
    hardware; gpus.rank_peak_rows), else the compute capability the trace records (an NVIDIA GPU
    derived from it), else the architectures its kernel names run on (all agreeing, or unknown).
    """
    by_model = {str(r["model"]): r for r in gpus.rows()}
    ccs: dict[int, tuple[int, int]] = {}
    if ctx.has("gpus", "ranks"):
        for r in ctx.rows(
            """SELECT r.rank, any_value(g.compute_major) AS major, any_value(g.compute_minor) AS minor
               FROM ranks r JOIN gpus g ON g.rank = r.rank AND g.device_id IS NOT DISTINCT FROM r.device_id
               WHERE g.compute_major IS NOT NULL GROUP BY r.rank"""
        ):
            ccs[int(r["rank"])] = (int(r["major"]), int(r["minor"]))
    cand: set[str] | None = None
    per_rank: list[dict[str, bool | None]] = []
    names: set[str] = set()
    for rec in gpus.rank_peak_rows(ctx.con):
        models = [m.strip() for m in str(rec["model"] or "").split(" / ") if m.strip() in by_model]
        archs = {str(by_model[m]["arch"]) for m in models}
        cc = ccs.get(int(rec["rank"])) if rec["source"] == "derived" else None
        if archs:
            names.add(f"{rec['model']} ({'/'.join(sorted(archs))})")
            per_rank.append({p: _all(gpu_arch.supports(p, a) for a in archs) for p in ADVISED})
        elif cc is not None:
            names.add(f"{rec['gpu_name'] or rec['model']} (compute capability {cc[0]}.{cc[1]})")
            per_rank.append({p: gpu_arch.supports(p, cc=cc) for p in ADVISED})
        else:
            if cand is None:
                cand, seen = _candidate_archs(ctx) if ctx.has("kernel_summary") else (set(), [])
                if cand:
                    names.add("GPU unknown; kernel names run on " + ", ".join(sorted(cand)))
            per_rank.append(
                {p: _all(gpu_arch.supports(p, a) for a in cand) if cand else None for p in ADVISED}
            )
    if not per_rank:
        per_rank = [dict.fromkeys(ADVISED)]
    out: dict[str, Any] = {p: _all(r[p] for r in per_rank) for p in ADVISED}
    out["gpu"] = "; ".join(sorted(names)) or "GPU unknown"
    return out


def _all(values) -> bool | None:
    """True when every value is True, False when every one is False, else None (unknown, mixed)."""
    vals = list(values)
    if vals and all(v is True for v in vals):
        return True
    if vals and all(v is False for v in vals):
        return False
    return None


def precision_fixes(support: dict[str, Any], what: str = "the matmuls") -> list[Fix]:
    """The fixes that move FP32/TF32 GEMMs to a faster precision, each only where the GPU takes it.

    bf16 autocast on a GPU with bf16 tensor cores; fp16 autocast with loss scaling on one with only
    fp16 ones (Volta, Turing); TF32 where it exists. With the GPU unknown each says what it needs."""
    fixes: list[Fix] = []
    bf16, fp16, tf32 = support.get("bf16"), support.get("fp16"), support.get("tf32")
    if bf16 is True:
        fixes.append(
            Fix(
                f"Run {what} under torch.autocast(dtype=torch.bfloat16) (or keep weights in bf16)",
                "8-bit mantissa: validate accuracy/convergence; keep reductions, softmax and the "
                "loss in FP32 (autocast does)",
            )
        )
    elif bf16 is None:
        fixes.append(
            Fix(
                f"Run {what} under torch.autocast in 16 bits: dtype=torch.bfloat16 where the GPU has "
                "bf16 tensor cores, else torch.float16 with a GradScaler (depends on the GPU: "
                f"{gpu_arch.NEEDS['bf16']})",
                "bf16's 8-bit mantissa / fp16's range (loss scaling): validate accuracy/convergence; "
                "keep reductions, softmax and the loss in FP32 (autocast does)",
            )
        )
    if bf16 is False and fp16 is not False:
        fixes.append(
            Fix(
                f"Run {what} under torch.autocast(dtype=torch.float16) with a torch.amp.GradScaler "
                f"(the GPU has fp16 tensor cores but no bf16 ones: {support.get('gpu')})",
                "fp16's narrow range: loss scaling is required and can overflow/skip steps; validate "
                "accuracy; keep reductions, softmax and the loss in FP32 (autocast does)",
            )
        )
    if tf32 is not False:
        fixes.append(
            Fix(
                "At least allow TF32: torch.backends.cuda.matmul.allow_tf32 = True / "
                "torch.set_float32_matmul_precision('high')"
                + ("" if tf32 else f" (depends on the GPU: {gpu_arch.NEEDS['tf32']})"),
                "10-bit mantissa in the products (FP32 accumulate): usually harmless for training, "
                "not for code that needs full FP32 (solvers, some losses); about half the bf16 rate",
            )
        )
    return fixes


def fp8_fix(support: dict[str, Any]) -> Fix | None:
    """FP8 as the next step for 16-bit GEMMs: only where the GPU has FP8 tensor cores (None where
    it has none), with its requirement spelled out where the GPU is unknown."""
    fp8 = support.get("fp8")
    if fp8 is False:
        return None
    return Fix(
        "Already in 16-bit (or lower) precision: FP8 matmuls/attention (Transformer Engine, "
        "FlashAttention-3) are the next precision step"
        + ("" if fp8 else f" (depends on the GPU: {gpu_arch.NEEDS['fp8']})"),
        "needs scaling recipes and accuracy validation",
    )


def _gain(slow: float | None, fast: float | None) -> float | None:
    """1 - slow / fast: the share of the time the faster peak saves (None when one is unknown)."""
    return None if slow is None or not fast else 1 - float(slow) / float(fast)


def _ratios(ctx: Ctx) -> tuple[dict[int, dict], str, list[str]]:
    """Per rank: fp32/tf32 gain factors toward the 16-bit tensor peak, how they were found.

    Known GPU: 1 - peak_fp32 / peak_16 (and tf32), peak_16 being bf16's, else fp16's (V100, T4).
    Unknown GPU: the range over the table's NVIDIA models of the architectures its kernel names
    run on; the upper end is the bound."""
    cand_archs, seen = _candidate_archs(ctx)
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


def _op_gemms(where: str) -> str:
    """SQL: the GEMM kernels matching `where` (over kernels k) with the op that launched each: the
    leaf matmul op of op_flops (Kineto record_shapes) on the launch's thread whose span holds the
    launch (cuda_api of the kernel's correlation id), with its A operand's dtype (addmm / baddbmm
    list the bias first) and M/N/K; op columns NULL where the trace recorded no shapes. No SQL
    comments: evidence SQL is folded onto one line."""
    return f"""
        WITH k AS (
            SELECT k.rank, k.name, k.duration_ns, a.tid, a.start_ns AS launch_ns
            FROM kernels k JOIN cuda_api a ON a.rank = k.rank AND a.correlation_id = k.correlation_id
            WHERE k.subcategory = 'gemm' AND ({where})
        )
        SELECT k.rank, k.name, gemm_precision(k.name) AS name_precision, k.duration_ns, o.op,
               CASE WHEN o.op IN ('aten::addmm', 'aten::baddbmm') THEN o.input_types[2]
                    ELSE o.input_types[1] END AS dtype,
               o.batch, o.m, o.n, o.k
        FROM k LEFT JOIN op_flops o ON o.rank = k.rank AND o.tid = k.tid AND o.kind = 'gemm'
            AND k.launch_ns BETWEEN o.start_ns AND o.end_ns"""


def _dtype_precision(col: str) -> str:
    """SQL: the precision of a PyTorch `Input type` (c10::BFloat16, c10::Half, float, c10::Float8_*)."""
    return (
        f"CASE WHEN regexp_matches({col}, '(?i)float8') THEN 'fp8' "
        f"WHEN regexp_matches({col}, '(?i)bfloat16') THEN 'bf16' "
        f"WHEN regexp_matches({col}, '(?i)half') THEN 'fp16' "
        f"WHEN regexp_matches({col}, '(?i)double') THEN 'fp64' "
        f"WHEN regexp_matches({col}, '(?i)float') THEN 'fp32' END"
    )


def _unnamed_float_gemms(ctx: Ctx) -> list[dict]:
    """Per rank, the GEMM kernels whose names state no type (gemm_precision NULL: cuBLASLt nvjet,
    Triton) launched by an op whose first input is float (op_flops, Kineto record_shapes): rows
    (rank, precision 'float', ns, n) like the rule's per-precision rows; [] without shapes."""
    if not has_shapes(ctx, "kernels", "cuda_api"):
        return []
    return ctx.rows(
        f"""SELECT rank, 'float' AS precision, sum(duration_ns) AS ns, count(*) AS n
            FROM ({_op_gemms("gemm_precision(k.name) IS NULL")})
            WHERE {_dtype_precision("dtype")} = 'fp32' GROUP BY rank"""
    )


def _op_dtypes(ctx: Ctx) -> tuple[Any, Signal] | None:
    """The input dtype of the ops that launched the FP32/TF32-named GEMMs (Kineto record_shapes), as
    evidence and a signal: a 16-bit op dtype contradicts the name; None without recorded shapes."""
    if not has_shapes(ctx, "kernels", "cuda_api"):
        return None
    sql = f"""SELECT name_precision, {_dtype_precision("dtype")} AS op_precision, dtype AS op_dtype, op,
                     count(*) AS launches, sum(duration_ns) AS kernel_ns,
                     list(DISTINCT rank ORDER BY rank) AS ranks,
                     arg_max(name, (duration_ns, name)) AS example
              FROM ({_op_gemms("gemm_precision(k.name) IN ('fp32', 'tf32')")})
              GROUP BY ALL ORDER BY kernel_ns DESC, op, op_dtype, name_precision"""
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


def gemm_precision(ctx: Ctx) -> list[Finding]:
    """GEMMs in FP32 (CUDA cores) or TF32 on GPUs whose tensor cores run bf16/fp16 much faster."""
    if not ctx.has("kernel_summary", "gemm_precision"):
        return []
    per = ctx.rows(
        """SELECT rank, gemm_precision(name) AS precision, sum(total_ns) AS ns, sum(instances) AS n
           FROM kernel_summary WHERE subcategory = 'gemm' GROUP BY 1, 2"""
    )
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
            """SELECT gemm_precision(name) AS precision, name, sum(instances) AS launches,
                      sum(total_ns) AS total_ns, round(avg(avg_ns), 1) AS avg_ns,
                      list(DISTINCT rank ORDER BY rank) AS ranks
               FROM kernel_summary WHERE subcategory = 'gemm'
               GROUP BY 1, 2 ORDER BY precision IN ('fp32', 'tf32') DESC, total_ns DESC, name""",
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


# ------------------------------------------------------------------------------------------------
# Unaligned GEMMs

#: Bytes per element of each GEMM input precision; a name with no type counts as 8 (the widest), so
#: only what is unaligned for every type is flagged (align1: 8 bytes at most).
_ELEM_BYTES_SQL = (
    "CASE gemm_precision(name) WHEN 'fp8' THEN 1 WHEN 'int8' THEN 1 WHEN 'bf16' THEN 2 WHEN 'fp16' THEN 2 "
    "WHEN 'tf32' THEN 4 WHEN 'fp32' THEN 4 ELSE 8 END"
)
#: The operand alignment, in bytes, that the fast (vectorised 128-bit) GEMM kernels need.
ALIGNED_BYTES = 16
_UNALIGNED = f"gemm_alignment(name) * {_ELEM_BYTES_SQL} < {ALIGNED_BYTES}"


def unaligned_gemm(ctx: Ctx) -> list[Finding]:
    """GEMM kernels built for unaligned operands (CUTLASS `_align1` / `_align2`) taking a real share
    of GEMM time: a dimension is not a multiple of 16 bytes and the GEMM runs with narrow loads."""
    if not ctx.has("kernel_summary", "gemm_precision", "gemm_alignment"):
        return []
    tot = ctx.row(
        f"""SELECT sum(total_ns) AS gemm_ns, sum(total_ns) FILTER (WHERE {_UNALIGNED}) AS bad_ns,
                   sum(instances) FILTER (WHERE {_UNALIGNED}) AS launches,
                   count(DISTINCT name) FILTER (WHERE {_UNALIGNED}) AS names
            FROM kernel_summary WHERE subcategory = 'gemm'"""
    )
    gemm_ns, bad_ns = float(tot.get("gemm_ns") or 0), float(tot.get("bad_ns") or 0)
    if not gemm_ns or not bad_ns:
        return []
    share = round(100.0 * bad_ns / gemm_ns, 1)
    if share < ctx.th["unaligned_gemm_min_pct"]:
        return []
    per_rank = ctx.rows(
        f"""SELECT rank, sum(total_ns) AS ns FROM kernel_summary
            WHERE subcategory = 'gemm' AND {_UNALIGNED} GROUP BY rank ORDER BY rank"""
    )
    worst = ctx.per_step(max(float(r["ns"]) for r in per_rank))
    # the precision that takes most of the unaligned time, and the element multiple it needs
    main = ctx.row(
        f"""SELECT gemm_precision(name) AS p, {_ELEM_BYTES_SQL} AS b FROM kernel_summary
            WHERE subcategory = 'gemm' AND {_UNALIGNED} GROUP BY ALL ORDER BY sum(total_ns) DESC, p LIMIT 1"""
    )
    label = {"tf32": "FP32/TF32", "fp32": "FP32"}.get(main.get("p"), str(main.get("p") or "wide").upper())
    multiple = ALIGNED_BYTES // int(main.get("b") or 8)
    ev = [
        ctx.evidence(
            "unaligned GEMM kernels",
            "GEMM kernels (name rules: subcategory gemm) whose name says they were built for operands "
            f"aligned to fewer than {ALIGNED_BYTES} bytes: alignment in elements (gemm_alignment, the "
            "`_alignN` token) x the input's element size (gemm_precision), all ranks (kernel_summary).",
            f"""SELECT name, gemm_precision(name) AS precision, gemm_alignment(name) AS align_elems,
                       gemm_alignment(name) * {_ELEM_BYTES_SQL} AS align_bytes, sum(instances) AS launches,
                       sum(total_ns) AS total_ns,
                       round(100.0 * sum(total_ns) / {gemm_ns}, 1) AS pct_of_gemm_time,
                       list(DISTINCT rank ORDER BY rank) AS ranks
                FROM kernel_summary WHERE subcategory = 'gemm' AND {_UNALIGNED}
                GROUP BY 1, 2, 3, 4 ORDER BY total_ns DESC, name""",
        )
    ]
    signals = [
        Signal(
            "unaligned share of GEMM time",
            share,
            "%",
            "supports",
            f"{int(tot['names'])} kernel name(s), {int(tot['launches'])} launches; aligned GEMMs of the "
            f"job take the other {100 - share:.1f} %",
        )
    ]
    if has_shapes(ctx, "kernels", "cuda_api"):
        shapes_sql = f"""SELECT op, dtype, batch, m, n, k, count(*) AS launches,
                                sum(duration_ns) AS kernel_ns, arg_max(name, (duration_ns, name)) AS kernel
                         FROM ({_op_gemms(_UNALIGNED.replace("name", "k.name"))})
                         WHERE op IS NOT NULL GROUP BY ALL
                         ORDER BY kernel_ns DESC, op, dtype, batch, m, n, k"""
        shaped = ctx.rows(shapes_sql)
        if shaped:
            ev.append(
                ctx.evidence(
                    "shapes of the unaligned GEMMs",
                    "The PyTorch op that launched each unaligned GEMM kernel (Kineto record_shapes: "
                    "op_flops, the op around the launch on its thread), with its M, N, K: the "
                    "dimension that is not a multiple of 16 bytes is the one to pad.",
                    shapes_sql,
                )
            )
            odd = sorted(
                {
                    f"{d}={r[d]}"
                    for r in shaped
                    for d in ("m", "n", "k")
                    if r[d] is not None and int(r[d]) % 8 != 0
                }
            )
            signals.append(
                Signal(
                    "dimensions not a multiple of 8",
                    ", ".join(odd[:8]) or "none",
                    "",
                    "supports" if odd else "neutral",
                    "from the ops' recorded shapes; only the leading dimensions matter (which ones "
                    "depends on the layout): a GEMM with an odd M can still run aligned kernels",
                )
            )
    return [
        ctx.finding(
            id="unaligned-gemm",
            title="GEMMs run unaligned kernels (operands not a multiple of 16 bytes)",
            kind="performance",
            summary=f"{share} % of GEMM time ({bad_ns / 1e6:.3f} ms over all ranks) runs in kernels built "
            f"for operands aligned to fewer than {ALIGNED_BYTES} bytes (CUTLASS align1/align2): a leading "
            f"dimension is not a multiple of {multiple} {label} elements, so the GEMM cannot use 128-bit "
            "loads. What padding saves is not in the trace (the aligned kernels of other shapes are no "
            f"yardstick): up to the {worst / 1e6:.3f} ms per step these kernels take.",
            ranks=[int(r["rank"]) for r in per_rank],
            steps=[],
            recoverable_ns_per_step=None,
            recoverable_method="unknown: an aligned kernel for the same shape was not run, so its "
            "time is not in the trace; metrics.unaligned_gemm_ns_per_step (worst rank's unaligned GEMM "
            "time / steps) is the most it could save",
            metrics={
                "unaligned_gemm_ns_total": int(bad_ns),
                "gemm_ns_total": int(gemm_ns),
                "unaligned_share_of_gemm_pct": share,
                "unaligned_gemm_ns_per_step": worst,
                "unaligned_kernel_names": int(tot["names"]),
                "aligned_bytes": ALIGNED_BYTES,
                "unaligned_precision": main.get("p"),
                "pad_to_multiple_of": multiple,
            },
            evidence=ev,
            signals=signals,
            fixes=[
                Fix(
                    f"Pad the GEMM dimensions to multiples of {multiple} {label} elements ({ALIGNED_BYTES} "
                    "bytes; 8 for bf16/fp16, 16 for FP8): the vocabulary (e.g. 30522 -> 30528: "
                    "pad_vocab_size_to_multiple_of / a resized embedding), hidden and head sizes, and the "
                    "tokens per batch; keep leading dimensions contiguous (no odd-stride slices fed to "
                    "matmul)",
                    "padded rows/columns cost memory and some FLOPs; padded logits must be masked (or "
                    "sliced off) before the softmax/loss; a padded vocabulary changes checkpoint shapes",
                ),
            ],
        )
    ]
