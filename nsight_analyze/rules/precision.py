"""Which tensor-core precisions the job's GPUs take, and the fixes that advise one.

Why a module of its own: every fix that advises bf16, TF32 or FP8 (the `gemm-precision`,
`memory-bound` and `dominant-kernel` findings, and `advice`'s kernel fixes) is offered only where
the GPU takes it, and says what it needs where the GPU is unknown; `gpu_support` is that one answer
(gpu_arch.supports, the one table of capabilities), from the GPU's peak-table model, its compute
capability, or the architectures its kernel names run on (`candidate_archs`).
"""

from __future__ import annotations

from typing import Any

from .. import gpus
from ..gpus import arch as gpu_arch
from ..gpus import table as gpu_table
from ..store.query_layer import statements
from .base import Ctx, Fix

SQL = statements("rules/precision")

_ARCH_FAMILY = {"blackwell": ("blackwell", "blackwell-consumer")}
#: Tensor-core precisions a fix may advise (gpu_arch.ARCH_PRECISIONS).
ADVISED = ("tf32", "bf16", "fp16", "fp8")


def candidate_archs(ctx: Ctx) -> tuple[set[str], list[str]]:
    """The architectures every GPU-specific kernel-name family of the job runs on, and the families."""
    fams = ctx.row(SQL.sql("kernel_families_seen", families=gpus.families_sql()))
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
    by_model = {str(r["model"]): r for r in gpu_table.rows()}
    ccs: dict[int, tuple[int, int]] = {}
    if ctx.has("gpus", "ranks"):
        for r in ctx.rows(SQL["rank_compute_capability"]):
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
                cand, seen = candidate_archs(ctx) if ctx.has("kernel_summary") else (set(), [])
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
