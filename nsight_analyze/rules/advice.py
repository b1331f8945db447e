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
  comms (NCCL and custom collectives)  -> overlap, bucketing, fewer bytes, NCCL settings and
      topology; p2p and all-to-all get their pipeline / MoE forms;
  other  -> measure first (Nsight Compute).
"""

from __future__ import annotations

import re

from .base import Fix

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
    subs = " ".join(f"WHEN lower({subcategory}) = '{k}' THEN '{v}'" for k, v in _FAMILY_OF_SUB.items())
    return (
        f"CASE WHEN lower({category}) = 'comms' THEN 'comms' {subs} "
        f"WHEN lower({category}) = 'compute' THEN 'compute' WHEN lower({category}) = 'memory' "
        "THEN 'elementwise' ELSE 'other' END"
    )


# memops by kind -> family (PtoP copies are communication)
MEMOP_FAMILY_SQL = (
    "CASE WHEN kind IN ('HtoD', 'DtoH') THEN 'transfer' WHEN kind = 'PtoP' THEN 'comms' ELSE 'copy' END"
)

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


_LOW_PRECISION = re.compile(r"bf16|bfloat16|fp16|f16|half|e4m3|e5m2|fp8|int8|i8i8")
_FP32 = re.compile(r"f32|fp32|float|sgemm|ffma")


def precision_of(name: str) -> str:
    """'low' (bf16/fp16/fp8/int8), 'tf32', 'fp32' or 'unknown', from markers in a kernel name."""
    low = name.lower()
    if "tf32" in low:
        return "tf32"
    if _LOW_PRECISION.search(low):
        return "low"
    if _FP32.search(low):
        return "fp32"
    return "unknown"


def _fp8() -> Fix:
    return Fix(
        "Already in 16-bit (or lower) precision: FP8 matmuls/attention (Transformer Engine, "
        "FlashAttention-3) on Hopper or newer are the next precision step",
        "needs scaling recipes and accuracy validation; Hopper/Blackwell only",
    )


def _precision(name: str) -> Fix:
    return _fp8() if precision_of(name) == "low" else _precision_tensor_cores()


def _precision_tensor_cores() -> Fix:
    return Fix(
        "Run the matmuls in bf16/fp16 (torch.autocast) or at least TF32 "
        "(torch.backends.cuda.matmul.allow_tf32 = True) so they use tensor cores",
        "lower precision: validate accuracy; fp16 needs loss scaling",
    )


def _fusion() -> Fix:
    return Fix(
        "Fuse the chain of elementwise/reduction ops into fewer kernels (torch.compile, or a fused "
        "kernel for the layer): each fused op saves a round trip through GPU memory",
        "compile time, recompiles on dynamic shapes, harder debugging",
    )


def _bf16_activations() -> Fix:
    return Fix(
        "Keep activations and these ops in bf16 (autocast) so each kernel moves half the bytes",
        "numerical range of reductions/normalisations: validate accuracy",
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
    """Overlap, bucketing, fewer bytes, NCCL settings/topology; the pipeline/MoE forms for p2p/all-to-all."""
    sub = (subcategory or "").lower()
    fixes = [
        Fix(
            "Overlap the collectives with compute: DDP/FSDP bucketing (bucket_cap_mb) so all-reduce starts "
            "during backward, FSDP forward/backward prefetch, no blocking wait before the optimizer",
            "smaller buckets mean more collective launches; larger buckets delay the first one; "
            "prefetch holds more parameters in memory",
        ),
        Fix(
            "Send fewer bytes: bf16 gradient reduction (DDP comm hook), gradient accumulation with no_sync() "
            "on the inner micro-batches",
            "bf16 reduction can cost accuracy; accumulation enlarges the effective batch (re-tune the "
            "learning rate)",
        ),
        Fix(
            "Tune NCCL and placement: check the rings/trees and transports NCCL picked (NCCL_DEBUG=INFO), "
            "NCCL_ALGO/NCCL_PROTO and channel count, keep tensor/sequence-parallel groups inside a "
            "node (NVLink), check IB/NIC affinity",
            "settings are topology specific and must be measured; placement limits the parallel layout",
        ),
    ]
    if sub in ("p2p", "sendrecv"):
        fixes.insert(
            0,
            Fix(
                "Pipeline parallelism: more micro-batches per step or an interleaved (virtual-stage) "
                "schedule so send/recv overlaps compute",
                "more activation memory and more, smaller messages",
            ),
        )
    elif sub == "alltoall":
        fixes.insert(
            0,
            Fix(
                "MoE all-to-all: lower the capacity factor, place experts to keep dispatch inside a node, "
                "overlap dispatch/combine with expert compute",
                "dropped tokens or load imbalance can cost accuracy; placement constrains parallelism",
            ),
        )
    return fixes


def kernel_fixes(fam: str, name: str = "") -> list[Fix]:
    """Fixes for one hot kernel of the given family (see the module docstring)."""
    low = name.lower()
    if fam == "gemm":
        fixes = [_ncu("achieved vs peak FLOP/s and whether tensor cores are used")]
        fixes.append(_precision(name))
        fixes.append(
            Fix(
                "Let the library or compiler choose tiles for these shapes (torch.compile "
                "mode='max-autotune', cuBLASLt heuristics) and pad M/N/K to multiples of 16 (8 for fp16)",
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
        return [first, _precision(name), _ncu("achieved vs peak FLOP/s")]
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
        return [_ncu("whether it is compute or memory bound"), _precision(name)]
    if fam == "norm":
        return [_fused_norm(), _fusion(), _bf16_activations()]
    if fam == "optimizer":
        return [
            _fused_optimizer(),
            Fix(
                "Shard the optimizer state (ZeRO-1/2, FSDP) so each rank updates fewer parameters",
                "extra reduce-scatter/all-gather traffic per step",
            ),
        ]
    if fam == "elementwise":
        return [_fusion(), _bf16_activations(), _more_work()]
    if fam == "embedding":
        return _embedding()
    if fam == "copy":
        return [_avoid_copies()]
    if fam == "transfer":
        return [_keep_on_gpu(), _pinned_async()]
    if fam == "comms":
        return comms_fixes()
    return [_ncu("whether it is compute or memory bound, then apply the fixes of that kind")]


def memory_fixes(families: list[str], short: bool) -> list[Fix]:
    """Fixes for memory-bound time, in the order of the families that take it (largest first).

    Kernel families: fusion (with fused norms / optimizers, batched embeddings where present) and
    bf16 activations, more work per kernel when the kernels are short; copies: copy avoidance;
    host<->device transfers: keep data on the GPU, pinned async copies. Never activation
    checkpointing: it trades memory for recomputation and adds time.
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
        out.append(_bf16_activations())
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
    capacity (queries/memory_peak.sql), or why that is unknown. Never guesses a capacity."""
    try:
        row = con.execute(
            """SELECT rank, peak_bytes_in_use, peak_bytes_reserved, capacity_bytes, capacity_source,
                      (SELECT count(DISTINCT rank) FROM memory_peak)
               FROM memory_peak ORDER BY used_pct DESC NULLS LAST, peak_bytes_in_use DESC LIMIT 1"""
        ).fetchone()
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
