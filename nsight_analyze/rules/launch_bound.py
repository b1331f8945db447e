"""The `launch-bound` finding: the GPU idled between operations while the host issued launches
(launch-bound) or ran other code (host-bound).

Why a module of its own: one finding, one home; it splits the worst rank's attributed idle into
launch gaps and host-bound idle, reads it over the steady-state windows when the trace holds graph
capture or compilation (rules/_idle.py), and chooses its fixes (warm-up, CUDA graphs, fusion, more
work per kernel, profiling the host code) from that split and the kernel lengths.
"""

from __future__ import annotations

from ..store.query_layer import statements
from ._common import step_metrics
from ._idle import STEADY_WINDOWS, cause_totals, gap_evidence, has_capture, per_step_evidence
from .base import Ctx, Finding, Fix, Signal
from .declare import Cause, Doc, Threshold, finding

SQL = statements("rules/launch_bound")


@finding(
    "launch-bound",
    "host-bound",
    doc=Doc(
        what=(
            "GPU idle between operations while the host is inside the next launch call (launch gap) or "
            "has not issued it yet (host-bound: Python, compilation, I/O); an operation that starts "
            "more than `settings.dependency_wait_us` after its launch call returned waited on something "
            "else (a stream/event wait: idle_other; the host blocked in a sync or copy, e.g. ROCm's "
            '`hipMemcpyWithStream`: sync_stall), never a launch gap (docs/metrics.md "Idle causes")'
        ),
        source=(
            "time_partition.launch_gap_ns + host_bound_ns (the `gaps` view itemises them, cause "
            "`launch_gap` / `host_bound`), `tp_step_ops`"
        ),
        recoverable=(
            "worst rank's launch_gap + host_bound (less the idle inside graph capture and torch.compile "
            "compilation, `capture_idle`: one-time work); launch-bound when the launch gaps are >= "
            "`launch_explained_min_pct` of that attributed idle (metrics `launch_gap_ns_total`, "
            "`host_bound_ns_total`, `launch_explained_pct`, 0-100), else host-bound. A launch-gap total "
            "dominated by one gap (a first launch loading modules, JIT, autotuning) is flagged and gets "
            "a warm-up fix first"
        ),
    ),
    thresholds={
        "launch_min_pct": Threshold(
            5.0,
            (
                "a step is launch-bound when launch gaps + host-bound idle of its worst rank >= this % of "
                "the step"
            ),
        ),
        "launch_explained_min_pct": Threshold(
            50.0,
            (
                "launch-bound (else host-bound) when launch gaps are >= this % of the attributed launch-gap "
                "+ host-bound idle (worst rank per step)"
            ),
        ),
    },
    reads=(
        "capture_idle",
        "diag_rank_kernels",
        "diag_step_causes",
        "diag_windows",
        "gaps",
        "steps",
        "time_partition",
        "tp_step_ops",
    ),
    whatif="no-launch-gaps",
    causes=(
        Cause(
            "idle-host",
            ("launch-bound", "host-bound"),
            (
                "GPU idle between operations while the host launches or runs other code (launch gaps + "
                "host-bound idle)"
            ),
            "ns_per_step",
            threshold="launch_min_pct",
            measure="launch_gap_ns + host_bound_ns",
        ),
    ),
)
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
    total, steps, ranks = cause_totals(ctx, "launch", th)
    if not steps and not (not ctx.has_steps and ranks):
        return []
    rec = ctx.per_step(total)
    short_ns = int(ctx.th["short_kernel_us"] * 1000)
    capture = has_capture(ctx)
    split_sql = SQL.sql("steady_split", steady_windows=STEADY_WINDOWS) if capture else SQL["launch_split"]
    split = ctx.row(SQL.sql("split_totals", split=split_sql))
    lg, hb = int(split["lg"]), int(split["hb"])
    explained = 100.0 * lg / (lg + hb) if lg + hb else 0.0
    is_launch = explained >= ctx.th["launch_explained_min_pct"]
    ev = [
        per_step_evidence(ctx, "launch", "launch gap + host-bound idle"),
        ctx.evidence(
            "launch gap vs host-bound idle",
            "Per step, the worst rank's attributed idle split into launch gaps (GPU idle while the next "
            "launch call ran) and host-bound idle (before it was issued) (time_partition via "
            "diag_step_causes); the launch-bound / host-bound verdict is the launch-gap share of their sum.",
            SQL.sql("split_evidence", split=split_sql),
        ),
    ]
    if capture:
        ev.append(
            ctx.evidence(
                "graph capture and compilation left out",
                "GPU idle inside CUDA/HIP-graph capture and instantiation and torch.compile compilation "
                "(capture_idle): one-time work, "
                "not counted in the steady-state numbers above.",
                SQL["capture_idle"],
            )
        )
    if ctx.has("gaps"):
        ev.append(gap_evidence(ctx, "'launch_gap', 'host_bound'", "launch-gap and host-bound"))
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
                SQL.sql("kernels_per_step", short_ns=short_ns, step_list=step_list),
            )
        )
        cmp = {
            r["lb"]: r
            for r in ctx.rows(SQL.sql("ops_launch_bound_vs_other", short_ns=short_ns, step_list=step_list))
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
        top = ctx.row(SQL.sql("launch_gaps_longest", in_steps=ctx.in_steps))
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
    launch_med = ctx.scalar(SQL["launch_call_median"]) if ctx.has("gpu_ops") else None
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
    graph_pct = ctx.scalar(SQL["graph_kernel_pct"]) if ctx.has("diag_rank_kernels") else None
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
