"""The `dominant-kernel` finding: one kernel takes most of the GPU kernel time.

Why a module of its own: its signals and fixes depend on the kernel's family (advice.family): a
GEMM gets tiling and precision (only what the GPU takes: rules/precision.gpu_support), attention a
fused kernel, an NCCL kernel its collective's fixes (rules/comm_families.py), never the other way round;
where the trace recorded shapes, its ops' achieved share of the roofline (op_roofline) says whether
the kernel itself is the lever. It bounds no time: that needs Nsight Compute.
"""

from __future__ import annotations

from ..store.query_layer import statements
from . import advice
from .base import Ctx, Finding, Signal
from .comm_families import kernel_comm_fixes
from .declare import Cause, Doc, Threshold, finding
from .op_roofline import op_evidence, roofline_share, roofline_signal
from .precision import gpu_support

SQL = statements("rules/dominant_kernel")


@finding(
    "dominant-kernel",
    doc=Doc(
        what=(
            "one kernel >= `dominant_kernel_pct` of kernel time; fixes of its family (metric `family`): "
            "an NCCL kernel gets its collective's fixes (send/recv: pipeline schedule and batched p2p, "
            "all-reduce: bucketing; the communication row below) and NCCL settings (its time includes "
            "waiting for peers), never GEMM tuning"
        ),
        source=(
            "`kernel_summary`, `roofline`; for a GEMM, attention or convolution kernel with recorded "
            "shapes `op_flops` (evidence `shapes of the dominant kernel's ops`, signal `its ops' "
            "achieved share of the roofline`: `supports` < 50 %, `against` >= 80 %, unknown without the "
            "dtype's peak; attention: signal `attention shape (B, H, L, D)` with the causal flag or "
            '"not recorded", `supports` for L >= 1024 below 50 % of the peak)'
        ),
        recoverable="unbounded (null)",
    ),
    thresholds={
        "dominant_kernel_pct": Threshold(50.0, "report a single kernel taking >= this % of all kernel time"),
    },
    reads=(
        "diag_comm_exposure",
        "diag_windows",
        "imbalance",
        "kernel_summary",
        "roofline",
        "steps",
        "time_partition",
    ),
    causes=(
        Cause(
            "dominant-kernel",
            ("dominant-kernel",),
            "The largest kernel's share of kernel time",
            "pct",
            magnitude="pct_of_kernel_time",
            threshold="dominant_kernel_pct",
            of_step=False,
            measure="dominant_share",
        ),
    ),
)
def dominant_kernel(ctx: Ctx) -> list[Finding]:
    """One kernel takes most of the GPU time: every optimisation question is about that kernel.

    The fixes are those of the kernel's family (advice.family): a GEMM gets tiling and precision,
    attention fused attention, an NCCL kernel its collective's fixes (rules/comm_families.py: a
    send/recv kernel the pipeline / point-to-point ones, never DDP bucketing), never the
    other way round.
    """
    if not ctx.has("kernel_summary"):
        return []
    top = ctx.row(SQL["largest_kernel"])
    if top.get("pct") is None or float(top["pct"]) < ctx.th["dominant_kernel_pct"]:
        return []
    name, cat, pct = str(top["name"]), str(top["category"]), float(top["pct"])
    sub = None if top["subcategory"] is None else str(top["subcategory"])
    fam = advice.family(cat, sub)
    safe = name.replace("'", "''")
    ev = [
        ctx.evidence(
            "dominant kernel per rank",
            "The kernel's statistics on every rank (kernel_summary).",
            SQL.sql("kernel_per_rank", kernel=safe),
        )
    ]
    what = {
        "comms": "its time includes waiting for the other ranks: overlap, its collective's own fixes and "
        "NCCL settings, not kernel tuning (see exposed-comm and load-imbalance)",
        "gemm": "check tensor-core use and achieved FLOP/s",
        "attention": "fused attention and precision",
        "conv": "cuDNN algorithm choice, channels_last and precision",
        "transfer": "copies: pinned memory and overlap",
        "copy": "avoidable layout/dtype copies",
    }.get(fam, "memory-bound: fusion and fewer bytes" if cat == "memory" else "measure it with ncu first")
    signals = [
        Signal(
            "kernel family",
            fam,
            "",
            "neutral",
            f"category {cat}, subcategory {sub or 'n/a'} (kernel name rules): {what}",
        )
    ]
    name_prec = ctx.scalar(SQL.sql("name_precision", kernel=safe)) if ctx.has("gemm_precision") else ""
    if fam in ("gemm", "attention", "conv", "compute"):
        prec = advice.precision_of(name, name_prec)
        signals.append(
            Signal(
                "precision (from the kernel name)",
                prec,
                "",
                "supports" if prec == "fp32" else "neutral",
                {
                    "fp32": "FP32 math (e.g. FFMA / sgemm): no tensor cores; a 16-bit (or TF32) "
                    "precision the GPU takes is the first lever (see the fixes)",
                    "tf32": "TF32 tensor cores; bf16/fp16 doubles the peak again",
                    "fp64": "FP64 math: lower precision is rarely an option for double-precision code",
                    "low": "16-bit or lower precision: already on tensor cores",
                }.get(prec, "no precision marker in the name: check it with ncu"),
            )
        )
    if fam == "comms" and ctx.has("diag_windows"):
        ov = ctx.scalar(SQL["comms_overlap"])
        if ov is not None:
            signals.append(
                Signal(
                    "mean comms/compute overlap",
                    round(float(ov), 1),
                    "%",
                    "supports" if ov < 50 else "neutral",
                    "share of communication time hidden behind other GPU work (time_partition.overlap_pct)",
                )
            )
    if ctx.has("roofline") and fam != "comms":
        r = ctx.row(SQL.sql("kernel_roofline", kernel=safe))
        if r.get("p") is not None:
            signals.append(
                Signal(
                    "achieved % of roofline",
                    round(float(r["p"]), 1),
                    "%",
                    "supports" if float(r["p"]) < 60 else "against",
                    f"{'CUPTI range profiler' if r['s'] == 'cupti_range' else 'Nsight Compute'}: "
                    f"{r['b']}-bound",
                )
            )
    if fam in ("gemm", "attention", "conv"):  # its ops' shapes: achieved vs the roofline
        signals.extend(_dominant_shapes(ctx, ev, safe, fam))
    if fam == "comms":  # its collective's / dimension's fixes, from the one list (rules/comm_families.py)
        fixes, comm_fams = kernel_comm_fixes(ctx, name, sub)
        if comm_fams:
            top_fam = comm_fams[0]
            signals.append(
                Signal(
                    "communication family of the kernel",
                    str(top_fam["family"]),
                    "",
                    "neutral",
                    f"its collective and communicator dimension ({top_fam['ops']}; dimension "
                    f"{top_fam['dimensions']}) by its time in diag_comm_exposure: "
                    + ", ".join(f"{f['family']} {100.0 * float(f['share'] or 0):.1f} %" for f in comm_fams)
                    + "; the fixes are that family's (rules/comm_families.py)",
                )
            )
    else:
        fixes = advice.kernel_fixes(fam, name, name_prec, gpu_support(ctx))
    return [
        ctx.finding(
            id="dominant-kernel",
            title=f"One kernel takes {pct:.0f} % of GPU kernel time",
            kind="performance",
            summary=f"{name[:120]} ({advice.FAMILY_LABEL.get(fam, fam)}) accounts for {pct:.1f} % of all "
            "kernel time"
            + (
                ": communication, so the lever is overlap and the network, not the kernel."
                if fam == "comms"
                else ": tune it first."
            ),
            ranks=[],
            steps=[],
            recoverable_ns_per_step=None,
            recoverable_method="not bounded from the timeline: needs its achieved vs peak throughput "
            "(Nsight Compute)"
            if fam != "comms"
            else "not bounded here: the exposed-comm and load-imbalance findings bound what overlap and "
            "balance can recover",
            metrics={
                "name": name,
                "category": cat,
                "subcategory": sub,
                "family": fam,
                "pct_of_kernel_time": pct,
                "instances": int(top["instances"]),
                "total_ns": int(top["total_ns"]),
            },
            evidence=ev,
            signals=signals,
            fixes=fixes,
        )
    ]


def _dominant_shapes(ctx: Ctx, ev: list, safe: str, fam: str) -> list[Signal]:
    """Signals from the shapes of the ops that launched the dominant kernel (op_roofline: Kineto
    record_shapes; the evidence table is appended to `ev`): how far below the roofline they run,
    and for attention the sequence length and whether the causal flag was recorded.

    Far below the roof the kernel itself is the lever (tiles, a better fused kernel); near it only
    doing less work (precision, fewer FLOPs) helps."""
    got = op_evidence(
        ctx,
        "shapes of the dominant kernel's ops",
        "the dominant kernel",
        SQL.sql("kernel_launches", kernel=safe),
    )
    if got is None:
        return []
    ev.append(got[0])
    rows = got[1]
    signals = []
    share, ns = roofline_share(rows)
    if share is not None:
        signals.append(
            roofline_signal(
                "its ops' achieved share of the roofline",
                share,
                ns,
                "the ops' FLOPs (from their shapes)",
                "far below the roof, tuning the kernel has room",
                "near the roof, only less work (precision, fewer FLOPs) helps",
            )
        )
    elif any(r["flops_per_op"] is not None for r in rows):
        signals.append(
            Signal(
                "its ops' achieved share of the roofline",
                None,
                "%",
                "neutral",
                "unknown: the GPU's peak for the ops' dtype (or its memory bandwidth) is not known; "
                "pass --gpu NAME",
            )
        )
    attn = [r for r in rows if r["kind"] == "attention" and r["attn_l"] is not None]
    if fam == "attention" and attn:
        top = max(attn, key=lambda r: (float(r["kernel_ns"]), str(r["op"])))
        causal = {True: "causal", False: "not causal", None: "causal flag not recorded (FLOPs unknown)"}
        long_seq = int(top["attn_l"]) >= 1024
        pct = top["pct_of_peak"]
        signals.append(
            Signal(
                "attention shape (B, H, L, D)",
                f"{top['attn_b']}x{top['attn_h']}x{top['attn_l']}x{top['attn_d']}",
                "",
                "supports" if long_seq and pct is not None and pct < 50 else "neutral",
                f"{top['op']}, {causal[top['causal']]}; "
                + (
                    f"{pct} % of the {top['peak_precision']} dense peak"
                    if pct is not None
                    else "achieved share of the peak unknown"
                )
                + (
                    ": long sequences far below the peak, a faster fused kernel (FlashAttention-3, "
                    "cuDNN SDPA) has room"
                    if long_seq and pct is not None and pct < 50
                    else ""
                ),
            )
        )
    return signals
