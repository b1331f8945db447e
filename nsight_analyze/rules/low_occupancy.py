"""The `low-occupancy` finding: kernels launched with fewer thread blocks than the GPU has SMs.

Why a module of its own: its bound (duration x (1 - blocks / SMs) per launch group, per window) and
the reading of the small-grid GEMMs' shapes (op_roofline: small work, split-K or a tile
configuration as the lever) are this rule's alone. HFU is a diagnostic, not a goal: it states what
the launch shapes say and which measurement would confirm it (Nsight Compute).
"""

from __future__ import annotations

import math

from ..store.query_layer import statements
from ._common import step_metrics
from ._window_steps import steps_of
from .base import Ctx, Finding, Fix, Signal
from .declare import Cause, Doc, Threshold, finding
from .op_roofline import K_SLICE, TILE, op_evidence, roofline_share, roofline_signal

SQL = statements("rules/low_occupancy")
# A small-grid launch group's idle-SM bound, as an exact DECIMAL (the statement says why).
_IDLE_SM = SQL["idle_sm_bound"]


@finding(
    "low-occupancy",
    doc=Doc(
        what=(
            "kernels with fewer thread blocks than SMs. Where the trace recorded shapes, the ops that "
            'launched the small-grid kernels (evidence `shapes of the small-grid ops`, "Shapes as '
            'evidence" below): signal `small-grid GEMM time with small work` (the share of small-grid '
            "GEMM kernel time whose op cannot fill the SMs with 128 x 128 output tiles even with K "
            "split in slices of 256, `split_k_tiles` < SMs: `supports` at >= 50 %, genuinely small work "
            "to batch or fuse; its note also gives the share a split-K could fill, `tiles_128` < SMs <= "
            "`split_k_tiles`, and the share whose output alone has enough tiles, a tile or "
            "persistent-kernel choice; a split-K fix is added when the second is >= 25 %, an autotuning "
            "fix when the third is >= 25 % and the ops are below 80 % of the roofline) and `small-grid "
            "ops' achieved share of the roofline` (`supports` < 50 %, `against` >= 80 %: near the roof "
            "more blocks gain little); metrics `small_work_gemm_pct`, `split_k_gemm_pct`, "
            "`large_output_gemm_pct`, `small_grid_ops_pct_of_roofline`"
        ),
        source=(
            "`diag_kernel_grids` (launches per window, kernel name and grid size, stored) x "
            "`gpus.sm_count`; `op_flops`, `kernels`, `cuda_api`, peaks for the shapes"
        ),
        recoverable=(
            "worst rank's sum of duration x (1 - blocks / SMs), at most the window per step; steps "
            "listed when >= `low_occupancy_min_pct` of the step"
        ),
    ),
    thresholds={
        "low_occupancy_min_pct": Threshold(
            1.0,
            (
                "report kernels with fewer blocks than SMs when their idle-SM bound is >= this % of the "
                "mean step"
            ),
        ),
        "sm_count_default": Threshold(
            0.0, "SM count to assume when the trace has none (0: skip the occupancy rule)"
        ),
    },
    reads=("diag_kernel_grids", "diag_window_bounds", "diag_windows", "steps"),
    causes=(
        Cause(
            "low-occupancy",
            ("low-occupancy",),
            "Kernels with fewer blocks than SMs",
            "ns_per_step",
            threshold="low_occupancy_min_pct",
        ),
    ),
)
def low_occupancy(ctx: Ctx) -> list[Finding]:
    """Kernels launched with fewer thread blocks than the GPU has SMs leave SMs idle."""
    if not ctx.has("diag_window_bounds", "diag_kernel_grids"):
        return []
    sm_default = int(ctx.th["sm_count_default"])
    th = ctx.th["low_occupancy_min_pct"]
    groups = SQL.sql("small_grid_groups", sm_default=sm_default)
    per_window = SQL.sql("idle_sm_per_window", groups=groups, idle_sm=_IDLE_SM)
    per_rank = ctx.rows(SQL.sql("idle_sm_per_rank", per_window=per_window))
    if not per_rank:
        return []
    total = float(max(r["bound"] for r in per_rank))
    rec = ctx.per_step(total)
    if (ctx.pct(rec) or 0) < th:
        return []
    ev = [
        ctx.evidence(
            "small-grid kernels",
            "Kernels with fewer blocks than SMs, by idle-SM time bound (duration x (1 - blocks / SMs)).",
            SQL.sql("small_grid_kernels", groups=groups, idle_sm=_IDLE_SM),
        )
    ]
    ranks = sorted(int(r["rank"]) for r in per_rank if r["bound"] > 0)
    steps = steps_of(ctx, per_window, th)
    shape_signals, shape_fixes, shape_metrics = _small_grid_shapes(ctx, ev)
    return [
        ctx.finding(
            id="low-occupancy",
            title="Kernels too small to fill the GPU (fewer blocks than SMs)",
            kind="performance",
            summary=f"Kernels with fewer thread blocks than SMs run {rec / 1e6:.3f} ms per step with "
            f"SMs idle "
            f"(bound: {ctx.pct(rec)} % of the mean step).",
            ranks=ranks,
            steps=steps,
            recoverable_ns_per_step=rec,
            recoverable_method="worst rank's sum over small-grid kernels of duration x (1 - blocks / "
            "SM count), at most the window per step, / steps: the time if the same work were spread "
            "over all SMs; steps listed when the bound is >= low_occupancy_min_pct of the step",
            metrics={"idle_sm_bound_ns_total": int(total), **shape_metrics, **step_metrics(ctx, steps, rec)},
            evidence=ev,
            signals=[
                Signal(
                    "SM count source",
                    "gpus table (or sm_count_default)",
                    "",
                    "neutral",
                    "blocks per SM is a launch-shape proxy; achieved occupancy needs Nsight Compute",
                ),
                *shape_signals,
            ],
            fixes=[
                Fix(
                    "Fuse the small kernels or batch them (horizontal fusion, torch.compile, foreach ops)",
                    "compile time; recompiles on dynamic shapes",
                ),
                Fix("Larger micro-batch so each kernel gets more blocks", "more memory; convergence changes"),
                Fix(
                    "Run independent small kernels concurrently on several streams", "harder ordering; memory"
                ),
                *shape_fixes,
            ],
        )
    ]


def _small_grid_kernels(ctx: Ctx) -> str:
    """SQL: the small-grid launches of low-occupancy, one row per kernel (rank, correlation_id,
    name, duration_ns): fewer blocks than the rank's SMs (or sm_count_default), not comms, starting
    inside a diag_windows window (diag_kernel_grids' definition, per launch)."""
    sm_default = int(ctx.th["sm_count_default"])
    return SQL.sql("small_grid_launches", sm_default=sm_default)


def _small_grid_shapes(ctx: Ctx, ev: list) -> tuple[list[Signal], list[Fix], dict]:
    """Signals, fixes and metrics from the shapes of the ops that launched the small-grid GEMMs and
    attention kernels (op_roofline: Kineto record_shapes); the evidence table is appended to `ev`.

    A GEMM whose output has fewer 128 x 128 tiles than the GPU has SMs, even with K split in slices
    of 256, is genuinely small work: no tile choice fills the GPU, batching or fusing it does. One
    with a small output and a deep K fills it by splitting K (split-K / stream-K); one whose output
    alone has enough tiles ran large tiles or a persistent kernel: a tile configuration is the
    lever. The ops' achieved share of the roofline says how much the idle SMs cost: near the roof,
    little.
    """
    got = op_evidence(ctx, "shapes of the small-grid ops", "the small-grid kernels", _small_grid_kernels(ctx))
    if got is None:
        return [], [], {}
    ev.append(got[0])
    rows = got[1]
    signals: list[Signal] = []
    fixes: list[Fix] = []
    gemm = [r for r in rows if r["kind"] == "gemm" and r["split_k_tiles"] is not None and r["sm_count"]]
    gemm_ns = math.fsum(float(r["kernel_ns"]) for r in gemm)

    def pct(keep) -> float | None:  # share of the small-grid GEMM kernel time in one class of shape
        return (
            round(100.0 * math.fsum(float(r["kernel_ns"]) for r in gemm if keep(r)) / gemm_ns, 1)
            if gemm_ns
            else None
        )

    roof, roof_ns = roofline_share(rows)
    small_pct = pct(lambda r: int(r["split_k_tiles"]) < int(r["sm_count"]))
    split_pct = pct(lambda r: int(r["tiles_128"]) < int(r["sm_count"]) <= int(r["split_k_tiles"]))
    tile_pct = pct(lambda r: int(r["tiles_128"]) >= int(r["sm_count"]))
    if small_pct is not None:
        signals.append(
            Signal(
                "small-grid GEMM time with small work",
                small_pct,
                "%",
                "supports" if small_pct >= 50 else "neutral",
                f"of the small-grid GEMM kernel time (ops with recorded shapes): {small_pct} % whose op "
                f"cannot fill the SMs with {TILE} x {TILE} output tiles even with K split in slices of "
                f"{K_SLICE} (genuinely small work: batch or fuse it, more tokens per GEMM, grouped GEMM); "
                f"{split_pct} % that could with split-K / stream-K (small output, deep K); {tile_pct} % "
                "whose output alone has enough tiles (the library chose large tiles or a persistent "
                "kernel: a tile configuration is the lever)",
            )
        )
        if split_pct >= 25:
            fixes.append(
                Fix(
                    "Split K for the GEMMs with a small output and a deep K (cuBLASLt split-K / "
                    "stream-K heuristics, torch.compile mode='max-autotune', a split-K Triton/CUTLASS "
                    "kernel)",
                    "a reduction of the partial results (extra memory traffic, non-deterministic "
                    "summation order with atomics)",
                )
            )
        if tile_pct >= 25 and (roof is None or roof < 80):  # near the roof a retune gains little
            fixes.append(
                Fix(
                    "Autotune the GEMM tiles for these shapes (torch.compile mode='max-autotune', "
                    "cuBLASLt heuristics, a CUTLASS or Triton kernel with smaller tiles)",
                    "autotuning time at start-up; a tuned configuration is per shape and GPU",
                )
            )
    share, ns = roof, roof_ns
    if share is not None:
        signals.append(
            roofline_signal(
                "small-grid ops' achieved share of the roofline",
                share,
                ns,
                "their ops' FLOPs",
                "far below the roof, the idle SMs cost real throughput",
                "near the roof, more blocks would gain little",
            )
        )
    return (
        signals,
        fixes,
        {
            "small_work_gemm_pct": small_pct,
            "split_k_gemm_pct": split_pct,
            "large_output_gemm_pct": tile_pct,
            "small_grid_ops_pct_of_roofline": share,
        },
    )
