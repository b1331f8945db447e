"""The `unaligned-gemm` finding: GEMM kernels built for unaligned operands (CUTLASS `_align1` /
`_align2`) take a real share of GEMM time.

Why a module of its own: it reads `kernel_summary` with the `gemm_alignment` and `gemm_precision`
name macros (alignment in elements x the element size, against the 16 bytes the fast kernels need)
and, where the trace recorded shapes, the M, N, K of the ops that launched the kernels
(rules/_gemm_ops.py): the dimension to pad. What padding saves is not in the trace, so it bounds no
time.
"""

from __future__ import annotations

from ..store.query_layer import statements
from ._gemm_ops import op_gemms
from .base import Ctx, Finding, Fix, Signal
from .declare import Cause, Doc, Threshold, finding
from .op_roofline import has_shapes

SQL = statements("rules/unaligned_gemm")

#: The operand alignment, in bytes, that the fast (vectorised 128-bit) GEMM kernels need.
ALIGNED_BYTES = 16


def _unaligned(column: str) -> str:
    """SQL: whether the kernel name in `column` was built for operands aligned to < ALIGNED_BYTES."""
    return SQL.sql(
        "unaligned",
        column=column,
        elem_bytes=SQL.sql("elem_bytes", column=column),
        aligned_bytes=ALIGNED_BYTES,
    )


#: Bytes per element of a kernel's input precision, and whether it is unaligned (column name).
_ELEM_BYTES_SQL = SQL.sql("elem_bytes", column="name")
_UNALIGNED = _unaligned("name")


@finding(
    "unaligned-gemm",
    doc=Doc(
        what=(
            "GEMM kernels built for operands aligned to fewer than 16 bytes: the `_alignN` token of "
            "CUTLASS/xmma names (`gemm_alignment`) x the element size of the name's precision (a name "
            "with no type counts as 8 bytes, so only align1 is judged), e.g. "
            "`cutlass_80_tensorop_bf16_s16816gemm_bf16_..._align2` (4 bytes); a leading dimension is "
            "not a multiple of 8 bf16/fp16, 4 FP32/TF32 or 16 FP8 elements. Severity info. Metrics "
            "`unaligned_share_of_gemm_pct`, `unaligned_gemm_ns_per_step` (the worst rank's unaligned "
            "GEMM time per step: the most padding could save), `unaligned_precision`, "
            "`pad_to_multiple_of`. Where the trace recorded shapes, the ops that launched them with "
            "M/N/K (`op_flops`: evidence `shapes of the unaligned GEMMs`, signal of the dimensions not "
            "a multiple of 8); shapes alone never fire it (an odd M runs aligned kernels when M is not "
            "a leading dimension). cuBLAS `ampere_*`/`volta_*`, nvjet and Tensile names carry no "
            "alignment: not judged. Fix: pad to the multiple, trade-off memory/FLOPs and masking"
        ),
        source=(
            "`kernel_summary` x `gemm_alignment(name)`, `gemm_precision(name)`; `op_flops`, `kernels`, "
            "`cuda_api` for the shapes"
        ),
        recoverable=(
            "unknown (null): the aligned kernel for the same shape did not run, so its time is not in "
            "the trace; >= `unaligned_gemm_min_pct` of GEMM time"
        ),
    ),
    thresholds={
        "unaligned_gemm_min_pct": Threshold(
            10.0,
            (
                "report GEMM kernels built for operands aligned to < 16 bytes (CUTLASS align1/align2) when "
                "they take >= this % of GEMM time"
            ),
        ),
    },
    reads=("kernel_summary", "op_flops", "steps"),
    causes=(
        Cause(
            "unaligned-gemm",
            ("unaligned-gemm",),
            "GEMM time in kernels built for unaligned operands",
            "pct",
            magnitude="unaligned_share_of_gemm_pct",
            threshold="unaligned_gemm_min_pct",
            of_step=False,
        ),
    ),
)
def unaligned_gemm(ctx: Ctx) -> list[Finding]:
    """GEMM kernels built for unaligned operands (CUTLASS `_align1` / `_align2`) taking a real share
    of GEMM time: a dimension is not a multiple of 16 bytes and the GEMM runs with narrow loads."""
    if not ctx.has("kernel_summary", "gemm_precision", "gemm_alignment"):
        return []
    tot = ctx.row(SQL.sql("unaligned_totals", unaligned=_UNALIGNED))
    gemm_ns, bad_ns = float(tot.get("gemm_ns") or 0), float(tot.get("bad_ns") or 0)
    if not gemm_ns or not bad_ns:
        return []
    share = round(100.0 * bad_ns / gemm_ns, 1)
    if share < ctx.th["unaligned_gemm_min_pct"]:
        return []
    per_rank = ctx.rows(SQL.sql("unaligned_per_rank", unaligned=_UNALIGNED))
    worst = ctx.per_step(max(float(r["ns"]) for r in per_rank))
    # the precision that takes most of the unaligned time, and the element multiple it needs
    main = ctx.row(SQL.sql("main_precision", elem_bytes=_ELEM_BYTES_SQL, unaligned=_UNALIGNED))
    label = {"tf32": "FP32/TF32", "fp32": "FP32"}.get(main.get("p"), str(main.get("p") or "wide").upper())
    multiple = ALIGNED_BYTES // int(main.get("b") or 8)
    ev = [
        ctx.evidence(
            "unaligned GEMM kernels",
            "GEMM kernels (name rules: subcategory gemm) whose name says they were built for operands "
            f"aligned to fewer than {ALIGNED_BYTES} bytes: alignment in elements (gemm_alignment, the "
            "`_alignN` token) x the input's element size (gemm_precision), all ranks (kernel_summary).",
            SQL.sql("unaligned_kernels", elem_bytes=_ELEM_BYTES_SQL, gemm_ns=gemm_ns, unaligned=_UNALIGNED),
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
        shapes_sql = SQL.sql("unaligned_shapes", op_gemms=op_gemms(_unaligned("k.name")))
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
