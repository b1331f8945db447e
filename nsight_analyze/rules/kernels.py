"""Kernel-level rules: small grids (low occupancy), memory-bound hotspots, one dominant kernel,
heavy host<->device copies.

HFU is a diagnostic, not a goal: these rules state what the kernel mix says and which measurement
would confirm it (Nsight Compute), instead of promising time they cannot bound. Their fixes come
from `advice`, by the kernel family the time is in (a comms kernel never gets GEMM tuning).
"""

from __future__ import annotations

import math

from . import advice
from ._common import step_metrics
from .base import Ctx, Finding, Fix, Signal
from .dimensions import kernel_comm_fixes
from .op_roofline import K_SLICE, TILE, op_evidence, roofline_share, roofline_signal
from .precision import gpu_support

_IN_WINDOWS = (
    """JOIN diag_window_bounds w ON w.rank = k.rank AND k.start_ns >= w.start_ns AND k.start_ns < w.end_ns"""
)

# A small-grid launch group's idle-SM bound, duration x (1 - blocks / SMs), rounded to 1e-9 ns as a
# DECIMAL: DECIMAL sums are exact, a DOUBLE sum's last bits (and so the rounded evidence column)
# depend on the order DuckDB's threads add the rows in.
_IDLE_SM = "CAST(duration_ns * (1 - blocks / sm) AS DECIMAL(38, 9))"


def _steps_of(ctx: Ctx, per_window_sql: str, th_pct: float) -> list[int]:
    """Steps in which some rank's value (column t of rows rank, step, t, window_ns) is >= th_pct of
    its window."""
    if not ctx.has_steps:
        return []
    return [
        int(s)
        for s in ctx.column(
            f"""SELECT DISTINCT step FROM ({per_window_sql})
                WHERE step IS NOT NULL AND t > 0 AND 100.0 * t / nullif(window_ns, 0) >= {th_pct}
                ORDER BY step"""
        )
    ]


def low_occupancy(ctx: Ctx) -> list[Finding]:
    """Kernels launched with fewer thread blocks than the GPU has SMs leave SMs idle."""
    if not ctx.has("diag_window_bounds", "diag_kernel_grids"):
        return []
    sm_default = int(ctx.th["sm_count_default"])
    th = ctx.th["low_occupancy_min_pct"]
    # launches grouped by grid size per window (diag_kernel_grids, stored), in diag_windows' windows
    base = f"""WITH k AS (SELECT d.rank, d.step, d.window_ns, d.name, d.blocks, d.launches,
                            d.total_ns AS duration_ns, coalesce(d.sm_count, nullif({sm_default}, 0)) AS sm
                     FROM diag_kernel_grids d JOIN diag_window_bounds w
                       ON w.rank = d.rank AND w.step IS NOT DISTINCT FROM d.step
                     WHERE coalesce(d.sm_count, nullif({sm_default}, 0)) > 0
                       AND d.blocks < coalesce(d.sm_count, nullif({sm_default}, 0)))"""
    # per window, capped at the window: kernels on several streams can overlap; each row's bound
    # as an exact decimal, so that the sum does not depend on the order DuckDB's threads add in
    per_window = f"""{base} SELECT rank, step, max(window_ns) AS window_ns,
                             least(sum({_IDLE_SM}), max(window_ns)) AS t
                      FROM k GROUP BY rank, step"""
    per_rank = ctx.rows(f"SELECT rank, sum(t) AS bound FROM ({per_window}) GROUP BY rank")
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
            f"""{base} SELECT name, sum(launches)::BIGINT AS launches, min(blocks) AS min_blocks,
                   max(blocks) AS max_blocks,
                   max(sm) AS sm_count, sum(duration_ns) AS total_ns,
                   CAST(sum({_IDLE_SM}) AS BIGINT) AS idle_sm_bound_ns,
                   list(DISTINCT rank ORDER BY rank) AS ranks
            FROM k GROUP BY name ORDER BY idle_sm_bound_ns DESC, name""",
        )
    ]
    ranks = sorted(int(r["rank"]) for r in per_rank if r["bound"] > 0)
    steps = _steps_of(ctx, per_window, th)
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
    return f"""SELECT k.rank, k.correlation_id, k.name, k.duration_ns FROM kernels k
               LEFT JOIN (SELECT rank, max(sm_count) AS sm FROM gpus GROUP BY rank) g ON g.rank = k.rank
               WHERE k.category IS DISTINCT FROM 'comms' AND k.grid_x IS NOT NULL
                 AND CAST(k.grid_x AS BIGINT) * k.grid_y * k.grid_z < coalesce(g.sm, nullif({sm_default}, 0))
                 AND EXISTS (SELECT 1 FROM diag_window_bounds w WHERE w.rank = k.rank
                             AND k.start_ns >= w.start_ns AND k.start_ns < w.end_ns)"""


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


# memory-category GPU time by fix family: memory kernels by subcategory, memops by kind (not the
# peer copies and NCCL copy-engine copies gpu_ops counts as communication)
_MEMORY_FAMILIES = f"""SELECT family, sum(ns) AS total_ns, sum(n) AS ops,
       round(100.0 * sum(ns) / sum(sum(ns)) OVER (), 2) AS pct_of_memory_time
FROM (SELECT {advice.family_sql("category", "subcategory")} AS family, end_ns - start_ns AS ns, 1 AS n
      FROM kernels WHERE category = 'memory'
      UNION ALL
      SELECT {advice.MEMOP_FAMILY_SQL} AS family, end_ns - start_ns, 1 FROM memops AS m
      WHERE kind <> 'PtoP'
        AND NOT EXISTS (SELECT 1 FROM nccl_ce_copies AS c
                        WHERE c.rank = m.rank AND c.correlation_id = m.correlation_id))
GROUP BY family ORDER BY total_ns DESC, family"""


def _nan_if_null(value: float | None) -> float:
    """A share, NaN when NULL (no memory-category time to share), as the DataFrame held it."""
    return math.nan if value is None else float(value)


def _memory_advice(ctx: Ctx) -> tuple[list[Fix], list[Signal], dict]:
    """Fixes for the memory-category time, by the families that take it (largest first)."""
    fams = ctx.rows(_MEMORY_FAMILIES) if ctx.has("kernels", "memops") else []
    # families worth a fix: the largest, and any other with >= 10 % of the memory time
    shares = {str(f["family"]): _nan_if_null(f["pct_of_memory_time"]) for f in fams}
    order = [f for i, (f, p) in enumerate(shares.items()) if i == 0 or p >= 10] or ["elementwise"]
    short_ns = int(ctx.th["short_kernel_us"] * 1000)
    med = (
        ctx.scalar("SELECT median(end_ns - start_ns) FROM kernels WHERE category = 'memory'")
        if ctx.has("kernels")
        else None
    )
    short = med is not None and med < short_ns
    signals = []
    if shares:
        top = order[0]
        signals.append(
            Signal(
                "largest memory family",
                top,
                "",
                "neutral",
                ", ".join(f"{advice.FAMILY_LABEL.get(f, f)} {p:.1f} %" for f, p in shares.items())
                + " of memory-category time"
                + (
                    ": mostly host<->device copies, see the host-device-copies finding"
                    if top == "transfer"
                    else ""
                ),
            )
        )
    if med is not None:
        signals.append(
            Signal(
                "median memory kernel",
                med,
                "ns",
                "supports" if short else "neutral",
                f"shorter than {ctx.th['short_kernel_us']} us: too little work per launch to reach full "
                "bandwidth; fuse or batch"
                if short
                else "long enough to stream at bandwidth: fewer bytes (fusion, precision) is the lever",
            )
        )
    fixes = advice.memory_fixes(order, short, gpu_support(ctx))  # 16-bit advice only where the GPU takes it
    return fixes, signals, {"memory_time_by_family_pct": shares}


def memory_bound(ctx: Ctx) -> list[Finding]:
    """Memory-bound kernels dominate: with Nsight Compute data, by roofline; else by category."""
    th = ctx.th["memory_bound_min_pct"]
    ncu_rows = (
        (ctx.scalar("SELECT count(*) FROM roofline WHERE bound = 'memory'") or 0)
        if ctx.has("roofline")
        else 0
    )
    if ncu_rows:
        # roofline sources with a point (Nsight Compute, the PyTorch profiler's CUPTI range profiler)
        placed = ctx.column("SELECT DISTINCT source FROM roofline WHERE bound IS NOT NULL ORDER BY source")
        names = {"ncu": "Nsight Compute", "cupti_range": "CUPTI range profiler"}
        label = " + ".join(names.get(s, s) for s in placed)
        ev = ctx.evidence(
            f"memory-bound launches ({label})",
            "Launches below the ridge point: achieved DRAM bandwidth against the GPU's (roofline).",
            """SELECT name, count(*) AS launches, CAST(sum(duration_ns) AS BIGINT) AS ncu_duration_ns,
                      CAST(sum(dram_bytes) AS BIGINT) AS dram_bytes,
                      round(100.0 * sum(dram_bytes) / sum(duration_ns * 1e-9 * mem_bw_bps), 1) AS
                          pct_of_dram_bw,
                      round(avg(intensity), 3) AS intensity, round(avg(ridge_flop_per_byte), 1) AS ridge
               FROM roofline WHERE bound = 'memory' GROUP BY name ORDER BY ncu_duration_ns DESC, name""",
        )
        # by profiled time; by launch count when the export has no durations
        share = ctx.scalar(
            "SELECT coalesce(100.0 * sum(duration_ns) FILTER (WHERE bound = 'memory') "
            "/ nullif(sum(duration_ns), 0), "
            "100.0 * count(*) FILTER (WHERE bound = 'memory') / nullif(count(*), 0)) FROM roofline"
        )
        headroom = ctx.scalar(
            "SELECT sum(greatest(duration_ns - dram_bytes / mem_bw_bps * 1e9, 0)) / "
            "nullif(sum(duration_ns), 0) "
            "FROM roofline WHERE bound = 'memory' AND mem_bw_bps > 0"
        )
        if (share or 0) < th:
            return []
        mem_ns = (
            ctx.scalar(
                "SELECT max(m) FROM (SELECT rank, sum(memory_ns) AS m FROM diag_windows GROUP BY rank)"
            )
            if ctx.has("diag_windows")
            else None
        )
        rec = (
            ctx.per_step(float(mem_ns or 0) * float(headroom or 0))
            if mem_ns and headroom is not None
            else None
        )
        steps = (
            [
                int(s)
                for s in ctx.column(
                    "SELECT DISTINCT step FROM diag_windows WHERE step IS NOT NULL AND memory_ns > 0 "
                    "ORDER BY step"
                )
            ]
            if rec and ctx.has_steps
            else []
        )
        fixes, mix_signals, mix = _memory_advice(ctx)
        return [
            ctx.finding(
                id="memory-bound",
                title=f"Memory-bound kernels dominate ({label} roofline)",
                kind="performance",
                summary=f"{round(share, 1)} % of profiled kernel time is below the ridge point "
                f"(memory-bound).",
                ranks=[],
                steps=steps,
                recoverable_ns_per_step=rec,
                recoverable_method="memory time per step (time_partition.memory_ns, worst rank) x "
                "the profiled "
                "memory-bound launches' bandwidth headroom (1 - bytes / (peak BW x duration))",
                metrics={
                    "memory_bound_pct_of_profiled": share,
                    "bandwidth_headroom": headroom,
                    **(mix if mix["memory_time_by_family_pct"] else {}),
                    **step_metrics(ctx, steps, rec),
                },
                evidence=[ev],
                signals=[Signal("source", label, "", "supports", "measured FLOPs and DRAM bytes")]
                + mix_signals,
                fixes=fixes,
            )
        ]
    if not ctx.has("diag_windows"):
        return []
    share = ctx.scalar(
        "SELECT 100.0 * sum(memory_ns) / nullif(sum(window_ns - idle_ns), 0) FROM diag_windows"
    )
    if share is None or share < th:
        return []
    ev = [
        ctx.evidence(
            "memory-category kernels",
            "Kernels the name rules classify as memory-bound, by total time over ranks (kernel_summary).",
            """SELECT name, subcategory, sum(instances) AS instances, sum(total_ns) AS total_ns,
                  round(avg(avg_ns), 1) AS avg_ns FROM kernel_summary WHERE category = 'memory'
           GROUP BY name, subcategory ORDER BY total_ns DESC, name, subcategory""",
        )
    ]
    if ctx.has("kernels", "memops"):
        ev.append(
            ctx.evidence(
                "memory-category time by fix family",
                "Memory kernels by subcategory family and copies/memsets by kind (all ranks, whole "
                "capture): the fixes follow the largest families.",
                _MEMORY_FAMILIES,
            )
        )
    fixes, mix_signals, mix = _memory_advice(ctx)
    return [
        ctx.finding(
            id="memory-bound",
            title="Memory-bound kernels take a large share of GPU time (by kernel category)",
            kind="performance",
            summary=f"{round(share, 1)} % of busy GPU time is memory-category work ("
            + (
                ", ".join(
                    f"{advice.FAMILY_LABEL.get(f, f)} {p:.0f} %"
                    for f, p in list(mix["memory_time_by_family_pct"].items())[:3]
                )
                + " of it"
                if mix["memory_time_by_family_pct"]
                else "elementwise, normalisation, copies"
            )
            + "); without per-kernel DRAM bytes (Nsight Compute, or CUPTI range-profiler dram__bytes "
            "counters) the recoverable time cannot be bounded.",
            ranks=[],
            steps=[],
            recoverable_ns_per_step=None,
            recoverable_method="not bounded: needs achieved DRAM bandwidth (ingest an Nsight Compute export, "
            "or a PyTorch-profiler trace whose range profiler recorded dram__bytes_read/write.sum)",
            metrics={"memory_pct_of_busy": share, "threshold_pct": th, **mix},
            evidence=ev,
            signals=[
                Signal(
                    "source",
                    "kernel name rules",
                    "",
                    "neutral",
                    "a name rule, not a measurement: confirm with ncu (SpeedOfLight / roofline)",
                ),
                *mix_signals,
            ],
            fixes=fixes,
        )
    ]


def dominant_kernel(ctx: Ctx) -> list[Finding]:
    """One kernel takes most of the GPU time: every optimisation question is about that kernel.

    The fixes are those of the kernel's family (advice.family): a GEMM gets tiling and precision,
    attention fused attention, an NCCL kernel its collective's fixes (rules/dimensions.py: a
    send/recv kernel the pipeline / point-to-point ones, never DDP bucketing), never the
    other way round.
    """
    if not ctx.has("kernel_summary"):
        return []
    top = ctx.row(
        """SELECT name, mode(category) AS category, mode(subcategory) AS subcategory,
                  sum(instances) AS instances, sum(total_ns) AS total_ns,
                  100.0 * sum(total_ns) / (SELECT nullif(sum(total_ns), 0) FROM kernel_summary) AS pct
           FROM kernel_summary GROUP BY name ORDER BY total_ns DESC, name LIMIT 1"""
    )
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
            f"""SELECT rank, name, category, instances, total_ns, avg_ns, med_ns, min_ns, max_ns,
                                  round(pct, 2) AS pct FROM kernel_summary
                WHERE name = '{safe}' ORDER BY rank""",
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
    # the name's input type (queries/gemm_precision.sql), one reading for the signal and the fixes
    name_prec = ctx.scalar(f"SELECT gemm_precision('{safe}')") if ctx.has("gemm_precision") else ""
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
        ov = ctx.scalar("SELECT avg(overlap_pct) FROM diag_windows WHERE comms_total_ns > 0")
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
        r = ctx.row(
            "SELECT avg(pct_of_roof) AS p, any_value(bound) AS b, any_value(source) AS s "
            f"FROM roofline WHERE name = '{safe}' AND pct_of_roof IS NOT NULL"
        )
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
    if fam == "comms":  # its collective's / dimension's fixes, from the one list (rules/dimensions.py)
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
                    + "; the fixes are that family's (rules/dimensions.py)",
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
        f"SELECT rank, correlation_id, name, duration_ns FROM kernels WHERE name = '{safe}'",
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


def host_device_copies(ctx: Ctx) -> list[Finding]:
    """Host<->device copies take a large share of the step (bytes, pageable memory, bandwidth)."""
    if not ctx.has("diag_window_bounds"):
        return []
    th = ctx.th["copy_min_pct"]
    base = f"""SELECT k.rank, w.step, k.kind, k.bytes, k.src_kind, k.dst_kind, k.end_ns - k.start_ns AS
                   duration_ns
               FROM memops k {_IN_WINDOWS} WHERE k.kind IN ('HtoD', 'DtoH')"""
    # time with a copy in flight per window (union: copies on several streams overlap), clipped to it
    per_window = f"""WITH c AS (SELECT {{'rank': k.rank, 'step': w.step}} AS k,
                                   greatest(k.start_ns, w.start_ns) AS start_ns,
                                   least(k.end_ns, w.end_ns) AS end_ns
                            FROM memops k {_IN_WINDOWS} WHERE k.kind IN ('HtoD', 'DtoH')),
                     u AS (SELECT k.rank AS rank, k.step AS step, sum(end_ns - start_ns) AS t
                           FROM interval_union('c') GROUP BY ALL)
                SELECT u.rank, u.step, u.t, w.end_ns - w.start_ns AS window_ns
                FROM u JOIN diag_window_bounds w ON w.rank = u.rank AND w.step IS NOT DISTINCT FROM u.step"""
    per_rank = ctx.rows(f"SELECT rank, sum(t) AS t FROM ({per_window}) GROUP BY rank")
    if not per_rank:
        return []
    total = float(max(r["t"] for r in per_rank))
    rec = ctx.per_step(total)
    if (ctx.pct(rec) or 0) < th:
        return []
    ev = [
        ctx.evidence(
            "host-device copies",
            "HtoD/DtoH copies inside the step windows: count, bytes, time, achieved bandwidth, "
            "pageable share.",
            f"""SELECT rank, kind, count(*) AS copies, sum(bytes) AS bytes, sum(duration_ns) AS total_ns,
                   round(sum(bytes) / nullif(sum(duration_ns), 0), 2) AS gb_per_s,
                   count(*) FILTER (WHERE 'Pageable' IN (src_kind, dst_kind)) AS pageable
            FROM ({base}) GROUP BY rank, kind ORDER BY total_ns DESC, rank, kind""",
        )
    ]
    stats = ctx.row(f"""SELECT count(*) AS n, avg(bytes) AS avg_b,
                              count(*) FILTER (WHERE 'Pageable' IN (src_kind, dst_kind)) AS pageable,
                              sum(bytes) / nullif(sum(duration_ns), 0) AS gbps FROM ({base})""")
    n, avg_b, pageable, gbps = (stats[c] for c in ("n", "avg_b", "pageable", "gbps"))
    ranks = [
        r["rank"] for r in per_rank if 100.0 * r["t"] / max(ctx.n_steps, 1) / max(ctx.mean_step_ns, 1) >= th
    ]
    steps = _steps_of(ctx, per_window, th)
    return [
        ctx.finding(
            id="host-device-copies",
            title="Heavy host<->device copy traffic",
            kind="performance",
            summary=f"HtoD/DtoH copies take {rec / 1e6:.3f} ms per step ({ctx.pct(rec)} % of the mean step).",
            ranks=sorted(int(r) for r in ranks),
            steps=steps,
            recoverable_ns_per_step=rec,
            recoverable_method="worst rank's time with an HtoD/DtoH copy in flight (union over "
            "streams) inside the step windows / steps (upper bound: fully overlapped or avoided "
            "copies); steps listed when >= copy_min_pct of the step",
            metrics={
                "copies": int(n),
                "avg_bytes": float(avg_b or 0),
                "pageable": int(pageable or 0),
                "achieved_gb_per_s": float(gbps or 0),
                **step_metrics(ctx, steps, rec),
            },
            evidence=ev,
            signals=[
                Signal(
                    "pageable copies",
                    int(pageable or 0),
                    "copies",
                    "supports" if pageable else "neutral",
                    "pageable copies are staged and synchronous: pinned memory roughly doubles bandwidth",
                ),
                Signal(
                    "mean bytes per copy",
                    float(avg_b or 0),
                    "B",
                    "supports" if (avg_b or 0) < 65536 else "neutral",
                    "many small copies are latency bound: batch them",
                ),
                Signal(
                    "achieved bandwidth",
                    round(float(gbps or 0), 2),
                    "GB/s",
                    "neutral",
                    "compare with the link (PCIe Gen4 x16 ~25 GB/s, Gen5 ~50 GB/s per direction)",
                ),
            ],
            fixes=[
                *advice.kernel_fixes("transfer"),
                Fix("Batch small copies into one buffer", "extra packing code and a staging buffer"),
            ],
        )
    ]
