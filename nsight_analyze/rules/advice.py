"""Fixes that fit the kernel family a finding is about, each with its trade-off.

Why: a fix is only useful if it can change the time it is offered for. GEMM tile tuning does not
speed up an NCCL kernel that waits for its peers, and activation checkpointing saves memory but
adds work, so it never speeds up memory-bound kernels. The rules ask this module for the fixes of
a family instead of writing one generic list.

Families (from the kernel name rules' category / subcategory, data/kernel_rules.csv):
  gemm, attention, conv, compute (other compute: FFT, offloaded loops)  -> tiling, precision,
      fused attention (FlashAttention / SDPA), cuDNN algorithm choice;
  elementwise, norm, optimizer (memory-bound work)  -> fusion (torch.compile), fused norms and
      optimizers, lower-precision activations, more work per kernel;
  embedding (lookups)  -> table-batched embeddings, lower-precision tables;
  copy (device copies, memsets)  -> avoid layout/dtype copies;
  transfer (host<->device memcpy)  -> keep data on the GPU, pinned memory and async copies;
  comms (NCCL and custom collectives)  -> the fixes of the collective's dimension or family
      (rules/comm_families.py, the one list: bucketing for gradient all-reduce, the schedule for
      send/recv, dispatch/combine for all-to-all), then NCCL settings and topology;
  other  -> measure first (Nsight Compute).

A fix that advises a precision (bf16, TF32, FP8, autocast) is offered only where the GPU takes it:
the rules pass `rules/precision.gpu_support` (gpu_arch.ARCH_PRECISIONS, the one table of
capabilities); where the GPU is unknown the fix says what it needs. A kernel's precision is its
`gemm_precision` (queries/kernels/gemm_precision.sql), the one reading of a name's type tokens.
"""

from __future__ import annotations

import functools
import re
import threading

import duckdb

from ..gpus.arch import NEEDS
from ..store.duck import sql_string
from ..store.query_layer import layer, statements
from .base import Fix
from .comm_families import subcategory_fixes
from .precision import fp8_fix, precision_fixes

SQL = statements("rules/advice")
_LOCK = threading.Lock()

# subcategory -> family (memory subcategories not listed are elementwise-like: fusion applies)
_FAMILY_OF_SUB = {
    "gemm": "gemm",
    "attention": "attention",
    "conv": "conv",
    "fft": "compute",
    "offload": "compute",
    "norm": "norm",
    "softmax": "norm",
    "optimizer": "optimizer",
    "embedding": "embedding",
    "copy": "copy",
    "memset": "copy",
}


def family(category: str | None, subcategory: str | None = None) -> str:
    """The fix family of a kernel from its name-rule category and subcategory."""
    cat = (category or "").lower()
    sub = (subcategory or "").lower()
    if cat == "comms":
        return "comms"
    if sub in _FAMILY_OF_SUB:
        return _FAMILY_OF_SUB[sub]
    if cat == "compute":
        return "compute"
    if cat == "memory":
        return "elementwise"
    return "other"


def family_sql(category: str, subcategory: str) -> str:
    """The SQL of `family` on two columns (same mapping), for per-family sums in the rules."""
    subs = " ".join(
        SQL.sql("family_of_subcategory", subcategory=subcategory, sub=k, family=v)
        for k, v in _FAMILY_OF_SUB.items()
    )
    return SQL.sql("family", category=category, subcategory_families=subs)


# memops by kind -> family (PtoP copies are communication)
MEMOP_FAMILY_SQL = SQL["memop_family"]

FAMILY_LABEL = {
    "gemm": "GEMM",
    "attention": "attention",
    "conv": "convolution",
    "compute": "other compute",
    "elementwise": "elementwise/reduction",
    "norm": "normalisation/softmax",
    "optimizer": "optimizer",
    "embedding": "embedding lookups",
    "copy": "device copies/memsets",
    "transfer": "host<->device copies",
    "comms": "communication",
    "other": "other",
}


def _ncu(what: str) -> Fix:
    return Fix(
        f"Profile it with Nsight Compute (ncu --set full -k regex:NAME) to see {what}",
        "ncu replays each profiled launch: run it on a few steps only",
    )


_LOW = ("bf16", "fp16", "fp8", "int8")


@functools.lru_cache(maxsize=1)
def _macro_connection() -> duckdb.DuckDBPyConnection:
    """An in-memory connection holding the gemm_precision macro, for a name read without a workspace."""
    con = duckdb.connect()
    con.execute(next(q.sql for q in layer() if q.name == "gemm_precision"))
    return con


def precision_of(name: str, precision: str | None = "") -> str:
    """'low' (bf16/fp16/fp8/int8), 'tf32', 'fp32', 'fp64' or 'unknown' for a kernel: its
    `gemm_precision` (queries/kernels/gemm_precision.sql, the one reading of a name's type tokens; pass it
    when the caller's workspace computed it, None meaning the name states none), else evaluated
    here on the name."""
    if precision == "":
        with _LOCK:
            row = _macro_connection().execute(SQL.sql("name_precision", literal=sql_string(name))).fetchone()
        precision = row[0] if row else None
    if precision in _LOW:
        return "low"
    return precision if precision in ("tf32", "fp32", "fp64") else "unknown"


def _precision(name: str, precision: str | None, support: dict | None) -> list[Fix]:
    """The precision step for a kernel, only where the GPU takes it (rules/precision.gpu_support;
    None: the GPU is unknown, and each fix says what it needs)."""
    support = support or {}
    cls = precision_of(name, precision)
    if cls == "low":
        if precision == "fp8":
            return []
        fix = fp8_fix(support)
        return [fix] if fix else []
    if cls == "fp64":
        return []
    fixes = precision_fixes(support)
    return [f for f in fixes if cls != "tf32" or "allow TF32" not in f.action]


def _fusion() -> Fix:
    return Fix(
        "Fuse the chain of elementwise/reduction ops into fewer kernels (torch.compile, or a fused "
        "kernel for the layer): each fused op saves a round trip through GPU memory",
        "compile time, recompiles on dynamic shapes, harder debugging",
    )


def _bf16_activations(support: dict | None = None) -> Fix:
    """Activations in 16 bits: bf16 where the GPU has bf16 (rules/precision.gpu_support), fp16 with
    loss scaling where it has only fp16 (Volta, Turing), either with its requirement when unknown."""
    bf16 = (support or {}).get("bf16")
    if bf16 is True:
        return Fix(
            "Keep activations and these ops in bf16 (autocast) so each kernel moves half the bytes",
            "numerical range of reductions/normalisations: validate accuracy",
        )
    if bf16 is False:
        return Fix(
            "Keep activations and these ops in fp16 (autocast with a GradScaler; this GPU has no bf16) so "
            "each kernel moves half the bytes",
            "fp16's narrow range: loss scaling is required; validate accuracy of reductions/normalisations",
        )
    return Fix(
        "Keep activations and these ops in 16 bits (autocast) so each kernel moves half the bytes: bf16 "
        f"where the GPU has it, else fp16 with a GradScaler (depends on the GPU: {NEEDS['bf16']})",
        "numerical range of reductions/normalisations (fp16: loss scaling): validate accuracy",
    )


def _more_work() -> Fix:
    return Fix(
        "Give each kernel more work: larger micro-batch, horizontal fusion / foreach ops for many "
        "small tensors",
        "more activation memory; a larger batch changes convergence (re-tune the learning rate)",
    )


def _fused_norm() -> Fix:
    return Fix(
        "Use fused normalisation/softmax kernels (Apex or Transformer Engine fused LayerNorm/RMSNorm, "
        "torch.compile, fused softmax inside SDPA)",
        "an extra dependency or compile time; fused kernels support fewer dtypes/shapes",
    )


def _fused_optimizer() -> Fix:
    return Fix(
        "Use a fused or foreach optimizer (torch.optim.AdamW(fused=True) / foreach=True, Apex FusedAdam): "
        "one kernel per parameter group instead of several per tensor",
        "fused=True needs CUDA parameters of a supported dtype; a different implementation to validate",
    )


def _embedding() -> list[Fix]:
    return [
        Fix(
            "Batch the embedding tables into one fused lookup (FBGEMM table-batched embeddings / TorchRec) "
            "with fused backward + optimizer",
            "a new dependency; tables change layout and checkpoint format",
        ),
        Fix(
            "Store the tables in fp16 or row-wise int8 so each lookup moves fewer bytes",
            "quantisation error: validate model quality",
        ),
    ]


def _keep_on_gpu() -> Fix:
    return Fix(
        "Keep tensors on the GPU: avoid .cpu()/.numpy()/.item() round trips and re-uploading the same "
        "data every step",
        "GPU memory",
    )


def _avoid_copies() -> Fix:
    return Fix(
        "Avoid layout and dtype copies in the step: .contiguous(), permute/transpose before matmuls, "
        ".to(dtype) round trips; keep one memory format (e.g. channels_last end to end)",
        "code changes; some ops need contiguous inputs and copy anyway",
    )


def _pinned_async() -> Fix:
    return Fix(
        "Copy host<->device from pinned memory with non_blocking=True on a side stream, overlapped "
        "with compute",
        "pinned memory is limited and not swappable; the consumer must wait on an event",
    )


def comms_fixes(subcategory: str | None = None) -> list[Fix]:
    """The fixes of a comms kernel known only by its name-rule subcategory.

    Why a delegate: communication fixes have one home, rules/comm_families.py (`FIXES` by dimension or
    collective, picked by `comm_fixes` / `kernel_comm_fixes`), so a send/recv kernel gets its
    point-to-point fixes here too, never DDP bucketing (issue 52)."""
    return subcategory_fixes(subcategory)


def kernel_fixes(
    fam: str, name: str = "", precision: str | None = "", support: dict | None = None
) -> list[Fix]:
    """Fixes for one hot kernel of the given family (see the module docstring). `precision` is the
    kernel's gemm_precision ("" = read it from the name here); `support` the GPU's tensor-core
    precisions (rules/precision.gpu_support; None = unknown): a precision fix is offered only where
    the GPU takes it."""
    low = name.lower()
    if fam == "gemm":
        fixes = [_ncu("achieved vs peak FLOP/s and whether tensor cores are used")]
        fixes.extend(_precision(name, precision, support))
        fixes.append(
            Fix(
                "Let the library or compiler choose tiles for these shapes (torch.compile "
                "mode='max-autotune', cuBLASLt heuristics) and pad M/N/K to multiples of 16 bytes "
                "(8 bf16/fp16 elements, 4 FP32, 16 FP8: see unaligned-gemm)",
                "autotuning adds compile time and is shape specific; padding wastes memory and FLOPs",
            )
        )
        return fixes
    if fam == "attention":
        if re.search(r"flash|fmha|sdpa|cudnn", low):
            first = Fix(
                "It is already a fused attention kernel: check head dim and sequence padding, and a "
                "newer backend for the GPU (FlashAttention-3 / cuDNN SDPA on Hopper)",
                "a new dependency or version; numerical differences to validate",
            )
        else:
            first = Fix(
                "Use fused attention: torch.nn.functional.scaled_dot_product_attention (Flash / "
                "memory-efficient backends) or FlashAttention instead of matmul + softmax + matmul",
                "dtype (fp16/bf16) and head-dim restrictions; numerical differences to validate",
            )
        return [first, *_precision(name, precision, support), _ncu("achieved vs peak FLOP/s")]
    if fam == "conv":
        return [
            Fix(
                "torch.backends.cudnn.benchmark = True so cuDNN picks the fastest algorithm for the shapes",
                "benchmarking at start-up and on every new input shape",
            ),
            Fix(
                "channels_last memory format with autocast (bf16/fp16) so convolutions run on tensor cores "
                "without layout transposes",
                "model and inputs must be converted; some ops fall back to NCHW copies",
            ),
            _ncu("achieved vs peak FLOP/s"),
        ]
    if fam == "compute":
        return [_ncu("whether it is compute or memory bound"), *_precision(name, precision, support)]
    if fam == "norm":
        return [_fused_norm(), _fusion(), _bf16_activations(support)]
    if fam == "optimizer":
        return [
            _fused_optimizer(),
            Fix(
                "Shard the optimizer state (ZeRO-1/2, FSDP) so each rank updates fewer parameters",
                "extra reduce-scatter/all-gather traffic per step",
            ),
        ]
    if fam == "elementwise":
        return [_fusion(), _bf16_activations(support), _more_work()]
    if fam == "embedding":
        return _embedding()
    if fam == "copy":
        return [_avoid_copies()]
    if fam == "transfer":
        return [_keep_on_gpu(), _pinned_async()]
    if fam == "comms":
        return comms_fixes()
    return [_ncu("whether it is compute or memory bound, then apply the fixes of that kind")]


def memory_fixes(families: list[str], short: bool, support: dict | None = None) -> list[Fix]:
    """Fixes for memory-bound time, in the order of the families that take it (largest first).

    Kernel families: fusion (with fused norms / optimizers, batched embeddings where present) and
    16-bit activations (bf16 where `support` says the GPU has it, else fp16 with loss scaling), more
    work per kernel when the kernels are short; copies: copy avoidance; host<->device transfers: keep
    data on the GPU, pinned async copies. Never activation checkpointing: it trades memory for
    recomputation and adds time.
    """
    kernel_fams = [f for f in families if f in ("elementwise", "norm", "optimizer", "embedding")]
    if not families:
        kernel_fams = ["elementwise"]
    out: list[Fix] = []
    for fam in families or kernel_fams:
        if fam == "norm":
            out.append(_fused_norm())
        elif fam == "optimizer":
            out.append(_fused_optimizer())
        elif fam == "embedding":
            out.extend(_embedding())
        elif fam == "copy":
            out.append(_avoid_copies())
        elif fam == "transfer":
            out.extend([_keep_on_gpu(), _pinned_async()])
        elif fam == "elementwise":
            out.append(_fusion())
    if kernel_fams:
        if not any(f.action == _fusion().action for f in out):
            out.append(_fusion())
        out.append(_bf16_activations(support))
        if short:
            out.append(_more_work())
    return out


# Fixes that need device memory: a larger (micro-)batch, less activation checkpointing/recomputation.
NEEDS_MEMORY = re.compile(
    r"(?i)\b(larger|bigger) (micro-?)?batch|\b(less|fewer|no|disable|reduce|drop) (activation )?"
    r"(checkpointing|recomputation)"
)
_GIB = float(1 << 30)


def memory_fit(con) -> str:
    """Whether memory-hungry fixes fit: the fullest rank's peak device memory against its GPU's
    capacity (queries/partition/memory_peak.sql), or why that is unknown. Never guesses a capacity."""
    try:
        row = con.execute(SQL["fullest_rank"]).fetchone()
    except Exception:  # noqa: BLE001 - a workspace without the table (older analysis)
        row = None
    if row is None:
        return (
            "whether it fits in GPU memory is unknown: the traces hold no device-memory events (record them "
            "with torch.profiler(profile_memory=True) or nsys --cuda-memory-usage=true)"
        )
    rank, peak, reserved, capacity, source, ranks = row
    held = f"peak {peak / _GIB:.1f} GiB allocated" + (
        f" ({reserved / _GIB:.1f} GiB reserved by the caching allocator)" if reserved else ""
    )
    where = f"rank {rank}" + (f", the fullest of {ranks}" if ranks > 1 else "")
    if capacity is None:
        return f"{held} on {where}; the GPU's memory capacity is unknown, so whether it fits is unknown"
    used = max(peak, reserved or 0)
    free = capacity - used
    cap = f"{capacity / _GIB:.1f} GiB" + (" (nominal, from the GPU name)" if source == "name" else "")
    if free >= used:
        verdict = "it fits: room to about double the memory in use"
    elif free >= 0.1 * capacity:
        verdict = f"it fits only partly: {free / _GIB:.1f} GiB free, {free / used:.0%} of what is in use"
    else:
        verdict = "it does not fit without freeing memory first"
    return f"{held} of {cap} on {where}: {verdict}"


def annotate_memory(con, findings) -> None:
    """Append memory_fit to the trade-off of every fix that needs memory (rules write fixes as
    text; this runs once over all findings, so each rule need not query memory itself)."""
    fixes = {id(fix): fix for f in findings for fix in f.fixes if NEEDS_MEMORY.search(fix.action)}
    if not fixes:
        return
    fit = memory_fit(con)
    for fix in fixes.values():  # a Fix object shared by two findings is annotated once
        if "; memory: " not in fix.trade_off:
            fix.trade_off = f"{fix.trade_off}; memory: {fit}"
