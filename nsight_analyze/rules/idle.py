"""Idle-time rules: the GPU waited on the input pipeline, on a synchronising call, or on launches.

All three read the idle split of `time_partition` through `diag_step_causes`: per step, the worst
rank's time in the cause bounds what fixing it can save (the job runs at its slowest rank's pace).
Recoverable per step = sum over steps of that maximum / number of steps.
"""

from __future__ import annotations

from ._common import step_metrics
from ._whatif import bounded_by
from .base import Ctx, Finding, Fix, Signal


def _cause_totals(ctx: Ctx, cause: str, min_pct: float):
    """(total ns over steps of the worst rank, affected steps, ranks over the threshold)."""
    causes = f"(SELECT * FROM diag_step_causes WHERE cause = '{cause}')"
    windows = "diag_windows"
    if cause == "launch" and _has_capture(ctx):
        # graph capture and compilation are one-time work (capture_idle): the steady state does
        # not lose their idle
        windows = f"({_STEADY_WINDOWS})"
        causes = f"""(SELECT step, max(launch_gap_ns + host_bound_ns) AS max_ns,
                             100.0 * max(launch_gap_ns + host_bound_ns) / nullif(max(window_ns), 0)
                                 AS share_pct
                      FROM {windows} GROUP BY step)"""
    total = ctx.scalar(f"SELECT coalesce(sum(max_ns), 0) FROM {causes}") or 0
    steps = ctx.column(f"SELECT step FROM {causes} WHERE max_ns > 0 AND share_pct >= {min_pct} ORDER BY step")
    col = {
        "input_stall": "input_stall_ns",
        "sync_stall": "sync_stall_ns",
        "launch": "launch_gap_ns + host_bound_ns",
    }[cause]
    ranks = ctx.column(
        f"SELECT DISTINCT rank FROM {windows} WHERE {col} > 0 "
        f"AND 100.0 * ({col}) / nullif(window_ns, 0) >= {min_pct} ORDER BY rank"
    )
    return int(total), [int(s) for s in steps if s is not None], [int(r) for r in ranks]


def _has_capture(ctx: Ctx) -> bool:
    """Whether a window holds idle inside a one-time phase (graph capture or instantiation,
    torch.compile compilation: capture_idle)."""
    return ctx.has("capture_idle") and bool(ctx.scalar("SELECT count(*) FROM capture_idle WHERE idle_ns > 0"))


# diag_windows without the idle of one-time phases (capture_idle: graph capture, torch.compile
# compilation): each cause loses its own part of the idle inside the phases.
_STEADY_WINDOWS = """SELECT d.* REPLACE (
           greatest(d.host_bound_ns - coalesce(c.idle_ns - c.launch_gap_idle_ns, 0), 0) AS host_bound_ns,
           greatest(d.launch_gap_ns - coalesce(c.launch_gap_idle_ns, 0), 0) AS launch_gap_ns)
    FROM diag_windows AS d
    LEFT JOIN capture_idle AS c ON c.rank = d.rank AND c.step IS NOT DISTINCT FROM d.step"""


def _per_step_evidence(ctx: Ctx, cause: str, label: str):
    return ctx.evidence(
        f"{label} per step",
        f"Per step: the worst rank's {label} time, the step length and the ranks affected "
        f"(diag_step_causes).",
        f"""SELECT step, worst_rank, max_ns AS {cause}_ns, step_ns, round(share_pct, 2) AS share_pct, ranks
            FROM diag_step_causes WHERE cause = '{cause}' AND max_ns > 0 ORDER BY max_ns DESC, step""",
    )


def _gap_evidence(ctx: Ctx, causes: str, label: str):
    where = "step IS NOT NULL" if ctx.has_steps else "step IS NULL"
    return ctx.evidence(
        f"{label} gaps",
        "The idle pieces behind the number, longest first, with what the host was doing (gaps view).",
        f"""SELECT rank, step, start_ns, duration_ns, cause, host_activity FROM gaps
            WHERE {where} AND cause IN ({causes}) ORDER BY duration_ns DESC, rank, start_ns""",
    )


@bounded_by("no-input-stalls")  # recoverable time <= the what-if gain (rules/_whatif.py)
def input_stall(ctx: Ctx) -> list[Finding]:
    """The GPU idled while the host was inside the input pipeline (DataLoader NVTX ranges)."""
    if not ctx.has("diag_step_causes", "diag_windows"):
        return []
    th = ctx.th["input_stall_min_pct"]
    total, steps, ranks = _cause_totals(ctx, "input_stall", th)
    if not steps and not (not ctx.has_steps and ranks):
        return []
    rec = ctx.per_step(total)
    ev = [_per_step_evidence(ctx, "input_stall", "input stall")]
    if ctx.has("gaps"):
        ev.append(_gap_evidence(ctx, "'input_stall'", "input-stall"))
    signals = []
    n_all = ctx.n_steps
    if ctx.has_steps and steps:
        period = sorted({b - a for a, b in zip(steps, steps[1:])})
        signals.append(
            Signal(
                "stalled steps",
                len(steps),
                "steps",
                "supports",
                f"{len(steps)} of {n_all} steps"
                + (
                    f", every {period[0]} steps: periodic, typical of a "
                    "prefetch queue running dry (too few workers)"
                    if len(period) == 1 and len(steps) > 2
                    else ""
                ),
            )
        )
    hb = ctx.scalar("SELECT coalesce(sum(host_bound_ns), 0) FROM diag_windows") or 0
    ins = ctx.scalar("SELECT coalesce(sum(input_stall_ns), 0) FROM diag_windows") or 0
    signals.append(
        Signal(
            "host-bound idle elsewhere",
            ctx.pct(ctx.per_step(hb / max(ctx.n_ranks, 1))),
            "% of step",
            "against" if hb > 0.5 * ins else "neutral",
            "GPU idle while the host ran other Python code; if large, the host is slow in general, not only "
            "the input pipeline",
        )
    )
    pageable = (
        ctx.scalar(
            "SELECT count(*) FROM memops WHERE kind = 'HtoD' AND (src_kind = 'Pageable' OR dst_kind "
            "= 'Pageable')"
        )
        or 0
    )
    signals.append(
        Signal(
            "pageable HtoD copies",
            pageable,
            "copies",
            "supports" if pageable else "neutral",
            "input batches copied from pageable memory: pin_memory=True makes the copy asynchronous"
            if pageable
            else "input copies already use pinned memory",
        )
    )
    return [
        ctx.finding(
            id="input-stall",
            title="Input pipeline stalls the GPU",
            kind="performance",
            summary=f"The GPU waits on the data loader: {ctx.pct(rec)} % of the mean step "
            f"({rec / 1e6:.3f} ms per step, worst rank per step).",
            ranks=ranks,
            steps=steps,
            recoverable_ns_per_step=rec,
            recoverable_method="sum over steps of the worst rank's input_stall_ns (time_partition) / steps: "
            "the idle time a never-empty input queue would remove",
            metrics={
                "input_stall_ns_total": total,
                "stalled_steps": step_metrics(ctx, steps, rec)["affected_steps"],
                "threshold_pct": th,
                **step_metrics(ctx, steps, rec),
            },
            evidence=ev,
            signals=signals,
            fixes=[
                Fix(
                    "More DataLoader workers (num_workers) and a deeper prefetch_factor",
                    "more host memory and CPU cores per rank; worker start-up time",
                ),
                Fix(
                    "pin_memory=True and .to(device, non_blocking=True)",
                    "pinned host memory is a limited, non-swappable resource",
                ),
                Fix(
                    "Move decoding/augmentation to the GPU (e.g. DALI) or pre-process the dataset offline",
                    "GPU time and memory for preprocessing; storage and a fixed augmentation pipeline",
                ),
            ],
        )
    ]


@bounded_by("no-sync-stalls")  # recoverable time <= the what-if gain (rules/_whatif.py)
def synchronisation(ctx: Ctx) -> list[Finding]:
    """Synchronising API calls and host-blocking copies (nsys cuda-sync-api / -memcpy / -memset parity)."""
    if not ctx.has("diag_sync_api_calls", "diag_sync_copies"):
        return []
    htod = int(ctx.th["sync_htod_min_bytes"])
    calls = ctx.evidence(
        "cuda-sync-api",
        "cudaDeviceSynchronize / cudaStreamSynchronize calls, longest first (nsys cuda-sync-api).",
        "SELECT rank, tid, start_ns, duration_ns, name FROM diag_sync_api_calls "
        "ORDER BY duration_ns DESC, rank, start_ns, tid, name",
    )
    copies = {}
    for rule, text in (
        (
            "cuda-sync-memcpy",
            f"synchronous memcpy (not DtoD, not HtoD <= {htod} B), longest first (nsys cuda-sync-memcpy)",
        ),
        (
            "cuda-async-memcpy",
            "cudaMemcpy*Async on pageable memory: effectively synchronous (nsys cuda-async-memcpy)",
        ),
        ("cuda-sync-memset", "synchronous memset on pinned/managed memory (nsys cuda-sync-memset)"),
    ):
        copies[rule] = ctx.evidence(
            rule,
            text,
            f"""SELECT rank, device_id, stream_id, start_ns, duration_ns, kind, bytes, src_kind, dst_kind,
                       api_name, api_start_ns, api_duration_ns
                FROM diag_sync_copies(htod_min_bytes := {htod}) WHERE nsys_rule = '{rule}'
                ORDER BY duration_ns DESC, rank, start_ns, device_id, stream_id, api_start_ns,
                         api_duration_ns, api_name""",
        )
    flagged = calls.total_rows + sum(e.total_rows for e in copies.values())
    total, steps, ranks = (0, [], [])
    if ctx.has("diag_step_causes"):
        total, steps, ranks = _cause_totals(ctx, "sync_stall", 0.0)
    rec = ctx.per_step(total)
    if flagged == 0 and (ctx.pct(rec) or 0) <= ctx.th["sync_stall_min_pct"]:
        return []
    ev = []
    if ctx.has("diag_step_causes") and total:
        ev.append(_per_step_evidence(ctx, "sync_stall", "sync stall"))
    ev += [e for e in [calls, *copies.values()] if e.total_rows]
    if ctx.has("gaps") and total:
        ev.append(_gap_evidence(ctx, "'sync_stall'", "sync-stall"))
    flagged_ranks = ctx.column(
        f"""SELECT DISTINCT rank FROM (SELECT rank FROM diag_sync_api_calls UNION ALL
            SELECT rank FROM diag_sync_copies(htod_min_bytes := {htod})) ORDER BY rank"""
    )
    ranks = sorted(set(ranks) | {int(r) for r in flagged_ranks})
    # every synchronising call, CUDA or HIP, explicit or a synchronous copy (sync_calls,
    # docs/metrics.md): the nsys-parity lists above know only cuda* names, so on ROCm they are empty
    listed = "sync_calls" if ctx.has("sync_calls") else "diag_sync_api_calls"
    blocked = ctx.scalar(f"SELECT coalesce(sum(duration_ns), 0) FROM {listed}") or 0
    n_calls = ctx.scalar(f"SELECT count(*) FROM {listed}") if ctx.has("sync_calls") else calls.total_rows
    per_step_calls = (n_calls or 0) / max(ctx.n_steps, 1) / max(ctx.n_ranks, 1)
    signals = [
        Signal(
            "GPU idle caused by syncs",
            ctx.pct(rec),
            "% of step",
            "supports" if rec else "against",
            "idle time that a synchronising call explains (sync_stall): what removing the syncs can recover"
            if rec
            else "the syncs did not leave the GPU idle: the host waited for work that "
            "was already queued, so they cost host time, not GPU time",
        ),
        Signal(
            "host time blocked in sync calls",
            blocked,
            "ns",
            "neutral",
            "host waiting is not GPU idle: it matters only when the host then cannot launch ahead",
        ),
        Signal(
            "sync calls per rank and step",
            round(per_step_calls, 2),
            "calls",
            "supports" if per_step_calls > 1 else "neutral",
            "more than one blocking sync per step usually means .item()/.cpu()/print in the training loop",
        ),
        Signal(
            "host-blocking copies",
            sum(e.total_rows for e in copies.values()),
            "copies",
            "supports" if any(e.total_rows for e in copies.values()) else "neutral",
            "synchronous or pageable copies block the launching thread like a sync",
        ),
    ]
    names = ", ".join(
        f"{k}: {v.total_rows}" for k, v in [("cuda-sync-api", calls), *copies.items()] if v.total_rows
    )
    listed = f"Synchronising calls and host-blocking copies ({names or 'none flagged by nsys rules'})"
    # reported whenever nsys's rules list a call (parity), but said as it is when none stalled
    title, summary = (
        ("Synchronisation stalls the GPU", f"{listed} leave the GPU idle {rec / 1e6:.3f} ms per step "
         f"({ctx.pct(rec)} % of the mean step).")
        if rec
        else ("Synchronising calls that did not stall the GPU", f"{listed} left the GPU idle for no "
              "measured time: they cost host time only, and matter where the host then cannot launch ahead.")
    )  # fmt: skip
    return [
        ctx.finding(
            id="excessive-sync",
            title=title,
            kind="performance",
            summary=summary,
            ranks=ranks,
            steps=steps,
            recoverable_ns_per_step=rec,
            recoverable_method="sum over steps of the worst rank's sync_stall_ns (GPU idle while the "
            "host was "
            "blocked in a synchronising call, time_partition) / steps",
            metrics={
                "sync_stall_ns_total": total,
                "sync_api_calls": calls.total_rows,
                **{k.replace("-", "_"): v.total_rows for k, v in copies.items()},
                **step_metrics(ctx, steps, rec),
            },
            evidence=ev,
            signals=signals,
            fixes=[
                Fix(
                    "Remove .item(), .cpu(), print(tensor) and explicit synchronize() from the step; "
                    "log every N steps",
                    "metrics and loss values are seen less often / later",
                ),
                Fix(
                    "Copy with pinned host buffers and non_blocking=True",
                    "pinned memory is limited; the result must not be read before an event says it is ready",
                ),
                Fix(
                    "Replace device-wide syncs with CUDA events / stream waits",
                    "ordering has to be reasoned about explicitly; wrong placement gives races",
                ),
                Fix(
                    "Find hidden syncs with torch.cuda.set_sync_debug_mode('warn')",
                    "debug mode slows the run",
                ),
            ],
        )
    ]


# Per step, the worst rank's (by launch_gap_ns + host_bound_ns, as diag_step_causes) attributed idle:
# the rows whose sum is the recoverable time, split into launch gaps and host-bound idle.
_LAUNCH_SPLIT = """SELECT c.step, c.worst_rank AS rank, d.launch_gap_ns, d.host_bound_ns,
           c.max_ns AS launch_and_host_ns, c.step_ns,
           round(100.0 * d.launch_gap_ns / nullif(c.max_ns, 0), 2) AS launch_gap_pct
    FROM diag_step_causes c JOIN diag_windows d
      ON d.rank = c.worst_rank AND d.step IS NOT DISTINCT FROM c.step
    WHERE c.cause = 'launch' AND c.max_ns > 0"""

# The same split over the steady-state windows (_STEADY_WINDOWS) when a window holds graph capture.
_STEADY_SPLIT = f"""SELECT step, rank, launch_gap_ns, host_bound_ns,
           launch_gap_ns + host_bound_ns AS launch_and_host_ns, step_ns,
           round(100.0 * launch_gap_ns / nullif(launch_gap_ns + host_bound_ns, 0), 2) AS launch_gap_pct
    FROM (SELECT *, max(window_ns) OVER (PARTITION BY step) AS step_ns FROM ({_STEADY_WINDOWS}))
    WHERE launch_gap_ns + host_bound_ns > 0
    QUALIFY row_number() OVER (PARTITION BY step ORDER BY launch_gap_ns + host_bound_ns DESC, rank) = 1"""


@bounded_by("no-launch-gaps")  # recoverable time <= the what-if gain (rules/_whatif.py)
def launch_bound(ctx: Ctx) -> list[Finding]:
    """The GPU idled between operations while the host issued launches (launch-bound) or ran other
    code (host-bound).

    Which of the two is decided from the attributed idle (time_partition / gaps): of the worst rank's
    launch_gap_ns + host_bound_ns per step (the recoverable time), the launch-gap share. A launch gap
    is GPU idle while the launch call of the next operation ran; host-bound idle is GPU idle before
    that call was even issued.
    """
    if not ctx.has("diag_step_causes", "diag_windows"):
        return []
    th = ctx.th["launch_min_pct"]
    total, steps, ranks = _cause_totals(ctx, "launch", th)
    if not steps and not (not ctx.has_steps and ranks):
        return []
    rec = ctx.per_step(total)
    short_ns = int(ctx.th["short_kernel_us"] * 1000)
    capture = _has_capture(ctx)
    split_sql = _STEADY_SPLIT if capture else _LAUNCH_SPLIT
    split = ctx.row(
        f"SELECT coalesce(sum(launch_gap_ns), 0) AS lg, coalesce(sum(host_bound_ns), 0) AS hb "
        f"FROM ({split_sql})"
    )
    lg, hb = int(split["lg"]), int(split["hb"])
    explained = 100.0 * lg / (lg + hb) if lg + hb else 0.0
    is_launch = explained >= ctx.th["launch_explained_min_pct"]
    ev = [
        _per_step_evidence(ctx, "launch", "launch gap + host-bound idle"),
        ctx.evidence(
            "launch gap vs host-bound idle",
            "Per step, the worst rank's attributed idle split into launch gaps (GPU idle while the next "
            "launch call ran) and host-bound idle (before it was issued) (time_partition via "
            "diag_step_causes); the launch-bound / host-bound verdict is the launch-gap share of their sum.",
            f"{split_sql} ORDER BY launch_and_host_ns DESC, step",
        ),
    ]
    if capture:
        ev.append(
            ctx.evidence(
                "graph capture and compilation left out",
                "GPU idle inside CUDA/HIP-graph capture and instantiation and torch.compile compilation "
                "(capture_idle): one-time work, "
                "not counted in the steady-state numbers above.",
                "SELECT rank, step, idle_ns, phase_ns FROM capture_idle ORDER BY rank, step",
            )
        )
    if ctx.has("gaps"):
        ev.append(_gap_evidence(ctx, "'launch_gap', 'host_bound'", "launch-gap and host-bound"))
    signals = [
        Signal(
            "idle attributed to launch calls",
            round(explained, 1),
            "% of launch + host-bound idle",
            "supports" if is_launch else "against",
            f"launch gaps {lg / 1e6:.3f} ms, host-bound idle {hb / 1e6:.3f} ms (worst rank per step, "
            "gaps view causes launch_gap / host_bound): "
            + (
                "the GPU mostly waits inside launch calls (launch-bound)"
                if is_launch
                else "the GPU mostly waits before the next launch is issued: the host is busy with other "
                "work (host-bound)"
            ),
        )
    ]
    if ctx.has_steps and ctx.has("tp_step_ops"):
        step_list = ", ".join(str(s) for s in steps) or "NULL"
        ev.append(
            ctx.evidence(
                "kernels per step",
                "GPU operations per rank and step, their median duration and how many are short.",
                f"""SELECT rank, step, count(*) AS ops, median(end_ns - start_ns) AS median_ns,
                       count(*) FILTER (WHERE end_ns - start_ns < {short_ns}) AS short_ops,
                       step IN ({step_list}) AS launch_bound
                FROM tp_step_ops GROUP BY rank, step ORDER BY launch_bound DESC, step, rank""",
            )
        )
        cmp = {
            r["lb"]: r
            for r in ctx.rows(
                f"""SELECT step IN ({step_list}) AS lb, avg(ops) AS ops, avg(short) AS short
                    FROM (SELECT rank, step, count(*) AS ops,
                                 count(*) FILTER (WHERE end_ns - start_ns < {short_ns}) AS short
                          FROM tp_step_ops GROUP BY rank, step) GROUP BY 1"""
            )
        }
        if True in cmp:
            ops_lb = float(cmp[True]["ops"])
            ops_ok = float(cmp[False]["ops"]) if False in cmp else None
            signals.append(
                Signal(
                    "operations per launch-bound step",
                    round(ops_lb, 1),
                    "ops",
                    "supports" if ops_ok is None or ops_lb > 1.2 * ops_ok else "neutral",
                    f"other steps: {round(ops_ok, 1) if ops_ok is not None else 'n/a'}",
                )
            )
            signals.append(
                Signal(
                    "short operations per launch-bound step",
                    round(float(cmp[True]["short"]), 1),
                    "ops",
                    "supports" if float(cmp[True]["short"]) > 0.5 * ops_lb else "neutral",
                    f"operations shorter than {ctx.th['short_kernel_us']} us: shorter than a launch, "
                    "so the host cannot keep the queue full",
                )
            )
    concentrated = False
    if ctx.has("gaps"):
        where = "step IS NOT NULL" if ctx.has_steps else "step IS NULL"
        top = ctx.row(
            f"""SELECT count(*) AS n, coalesce(max(duration_ns), 0) AS longest,
                       coalesce(sum(duration_ns), 0) AS total
                FROM gaps WHERE {where} AND cause = 'launch_gap'"""
        )
        n, longest, lg_all = int(top["n"]), int(top["longest"]), int(top["total"])
        if lg_all:
            top_pct = 100.0 * longest / lg_all
            concentrated = top_pct >= 50.0
            signals.append(
                Signal(
                    "longest launch gap",
                    round(top_pct, 1),
                    "% of launch-gap time",
                    "against" if concentrated else "neutral",
                    f"{longest / 1e6:.3f} ms of {lg_all / 1e6:.3f} ms in {n} launch gaps (all ranks): "
                    + (
                        "one slow launch call, not per-kernel overhead: a first launch loads modules "
                        "(lazy loading), compiles or autotunes"
                        if concentrated
                        else "spread over many launches: per-launch overhead"
                    ),
                )
            )
    launch_med = (
        ctx.scalar(
            "SELECT median(a.end_ns - a.start_ns) FROM cuda_api a JOIN gpu_ops g "
            "ON g.rank = a.rank AND g.correlation_id = a.correlation_id"
        )
        if ctx.has("gpu_ops")
        else None
    )
    if launch_med is not None:
        signals.append(
            Signal(
                "median launch call",
                launch_med,
                "ns",
                "neutral",
                "launch calls overlap GPU work while the queue is full, so their total is not idle time: "
                "the verdict uses the idle attributed to them (launch gaps), not calls x duration",
            )
        )
    graph_pct = (
        ctx.scalar("SELECT 100.0 * sum(graph_kernel_ns) / nullif(sum(kernel_ns), 0) FROM diag_rank_kernels")
        if ctx.has("diag_rank_kernels")
        else None
    )
    signals.append(
        Signal(
            "kernel time launched from CUDA graphs",
            round(graph_pct or 0.0, 2),
            "%",
            "against" if (graph_pct or 0) > 50 else "supports",
            "graphs already amortise launches"
            if (graph_pct or 0) > 50
            else "little or no CUDA-graph use: graphs would remove per-kernel launch cost",
        )
    )
    method = (
        "sum over steps of the worst rank's launch_gap_ns + host_bound_ns (time_partition) / steps: the "
        "idle time between operations while the host was issuing them or running other code"
    )
    metrics = {
        "launch_gap_ns_total": lg,
        "host_bound_ns_total": hb,
        "threshold_pct": th,
        "launch_explained_pct": round(explained, 1),
        **step_metrics(ctx, steps, rec),
    }
    warm_up = Fix(
        "Warm up before the profiled range (run a few steps, or start the capture after them with "
        "nsys --capture-range=cudaProfilerApi): first launches load modules lazily, compile and autotune",
        "a longer start-up; CUDA_MODULE_LOADING=EAGER instead costs memory and start-up time",
    )
    if not is_launch:
        return [
            ctx.finding(
                id="host-bound",
                title="Host-bound: the GPU waits while the host runs other code",
                kind="performance",
                summary=f"The GPU idles {rec / 1e6:.3f} ms per step ({ctx.pct(rec)} % of the mean "
                f"step) between operations; {100 - explained:.0f} % of it before the next launch was "
                "issued, while the host was busy elsewhere (Python, compilation, I/O).",
                ranks=ranks,
                steps=steps,
                recoverable_ns_per_step=rec,
                recoverable_method=method,
                metrics={"host_idle_ns_total": total, **metrics},
                evidence=ev,
                signals=signals,
                fixes=[
                    Fix(
                        "Profile the host (nsys --sample=cpu, py-spy) in the gaps and move that work off the "
                        "critical path (async checkpointing, cached compilation, background threads)",
                        "more threads/memory; asynchronous work needs care with ordering",
                    ),
                    warm_up,
                    Fix(
                        "CUDA graphs or torch.compile to shorten the host's per-step work",
                        "static shapes, compile time",
                    ),
                ],
            )
        ]
    fixes = [
        Fix(
            "Capture the step (or its static part) in a CUDA graph (torch.cuda.graphs / CUDA Graph Trees)",
            "static shapes and addresses, capture cost, a private memory pool, no host sync inside",
        ),
        Fix(
            "Fuse small kernels: torch.compile, fused optimizers (foreach/fused=True), fused layers",
            "compile time, recompilation on new shapes, harder debugging",
        ),
        Fix(
            "Give each kernel more work (larger micro-batch, horizontal fusion)",
            "more activation memory; a larger batch changes convergence (re-tune the learning rate)",
        ),
    ]
    if concentrated:
        fixes.insert(0, warm_up)
    scope = (
        f"In {len(steps)} {'steps' if len(steps) != 1 else 'step'}"
        if ctx.has_steps
        else "In the capture (no steps found)"
    )
    return [
        ctx.finding(
            id="launch-bound",
            title="Launch-bound: a few slow launch calls leave the GPU idle"
            if concentrated
            else "Launch-bound steps: many short kernels, GPU waits for launches",
            kind="performance",
            summary=f"{scope} the GPU idles between launches: {rec / 1e6:.3f} ms per step "
            f"({ctx.pct(rec)} % of the mean step), "
            f"{explained:.0f} % of it inside launch calls.",
            ranks=ranks,
            steps=steps,
            recoverable_ns_per_step=rec,
            recoverable_method=method,
            metrics={
                "launch_idle_ns_total": total,
                "launch_bound_steps": metrics["affected_steps"],
                **metrics,
            },
            evidence=ev,
            signals=signals,
            fixes=fixes,
        )
    ]
