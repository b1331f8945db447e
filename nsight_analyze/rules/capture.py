"""Capture findings: facts about the trace that change how every other finding must be read.

They have no recoverable time and are listed before the performance findings.
"""

from __future__ import annotations

from ..classify import unclassified_note, unclassified_share
from ..gpus import VENDOR_SQL
from ..sources.base import CORRUPT_TIMING
from ..summary import CORRUPT_TIMING_SQL
from .base import Ctx, Finding, Fix, Signal, mean


def clock_skew(ctx: Ctx) -> list[Finding]:
    """Hosts whose clocks disagreed: cross-rank timings are only as good as the correction."""
    if not ctx.has("merge_rank_clock", "alignment_quality"):
        return []
    th_ns = ctx.th["clock_skew_min_us"] * 1000
    skewed = ctx.rows(
        f"SELECT rank, host, correction_ns FROM merge_rank_clock WHERE abs(correction_ns) >= {th_ns} "
        "ORDER BY rank"
    )
    if not skewed:
        return []
    ev = [
        ctx.evidence(
            "clock alignment per host",
            "Refinement applied on top of the session-start (UTC) offsets and the residual after it "
            "(alignment_quality).",
            "SELECT * FROM alignment_quality ORDER BY host",
        ),
        ctx.evidence(
            "corrected ranks",
            "Ranks whose clock was corrected by more than the threshold (merge_rank_clock).",
            f"""SELECT rank, host, session_offset_ns, clock_offset_ns, correction_ns, alignment_method
                           FROM merge_rank_clock WHERE abs(correction_ns) >= {th_ns} ORDER BY rank""",
        ),
    ]
    worst = int(max(abs(r["correction_ns"]) for r in skewed))
    resid = ctx.scalar("SELECT max(residual_p95_ns) FROM alignment_quality")
    corrected = ctx.scalar(
        "SELECT bool_and(method = 'collectives') FROM alignment_quality "
        f"WHERE host IN (SELECT host FROM merge_rank_clock WHERE abs(correction_ns) >= {th_ns})"
    )
    hosts = sorted({str(r["host"]) for r in skewed})
    return [
        ctx.finding(
            id="clock-skew",
            title=f"Host clocks disagreed by up to {worst / 1e6:.3f} ms (corrected)"
            if corrected
            else f"Host clocks disagree by up to {worst / 1e6:.3f} ms",
            kind="capture",
            severity="info" if corrected else "medium",
            summary=f"The session-start (UTC) clocks of {', '.join(hosts)} were off by up to "
            f"{worst / 1e6:.3f} ms; "
            + (
                "the collectives' common end times corrected it"
                if corrected
                else "no collective-based correction: cross-rank arrival times are unreliable"
            )
            + (f" (residual p95 {resid} ns)." if resid is not None else "."),
            ranks=[int(r["rank"]) for r in skewed],
            steps=[],
            recoverable_ns_per_step=None,
            recoverable_method="not a performance problem: no recoverable time",
            metrics={"max_correction_ns": worst, "residual_p95_ns": resid, "hosts": hosts},
            evidence=ev,
            signals=[
                Signal(
                    "alignment method",
                    "collectives" if corrected else "session-start",
                    "",
                    "neutral",
                    "load-imbalance numbers use per-rank compute and do not depend on the alignment; "
                    "arrival skews and waits do",
                )
            ],
            fixes=[
                Fix(
                    "Synchronise host clocks (chrony/PTP) before profiling multi-node jobs",
                    "cluster configuration outside the job",
                )
            ],
        )
    ]


def cuda_graphs(ctx: Ctx) -> list[Finding]:
    """How much kernel time replays from CUDA graphs (per-kernel launch attribution is lost there)."""
    th = ctx.th["graph_min_pct"]
    if not ctx.has("diag_rank_kernels"):
        return []
    per_rank = ctx.rows(
        """SELECT rank, kernels, graph_kernels, 100.0 * graph_kernel_ns / nullif(kernel_ns, 0) AS graph_pct
           FROM diag_rank_kernels ORDER BY rank"""
    )
    covered = [r for r in per_rank if (r["graph_pct"] or 0) >= th]
    if not covered:
        return []
    launches = (
        ctx.scalar("SELECT coalesce(sum(calls), 0) FROM api_summary WHERE is_graph_launch(name)")
        if ctx.has("api_summary")
        else 0
    ) or 0
    ev = [
        ctx.evidence(
            "CUDA-graph coverage per rank",
            "Kernels replayed from CUDA/HIP graphs (a graph node, or launched by a graph launch call: "
            "cudaGraphLaunch, cuGraphLaunch, hipGraphLaunch) and their share of kernel time.",
            """SELECT rank, kernels, graph_kernels, graphs,
                      round(100.0 * graph_kernel_ns / nullif(kernel_ns, 0), 2) AS graph_time_pct
               FROM diag_rank_kernels ORDER BY rank""",
        )
    ]
    steps: list[int] = []
    if ctx.has_steps and ctx.has("diag_window_bounds", "graph_coverage"):
        steps = [
            int(s)
            for s in ctx.column(
                """SELECT DISTINCT w.step FROM graph_coverage g JOIN diag_window_bounds w
                     ON w.rank = g.rank AND w.step IS NOT DISTINCT FROM g.step
                   WHERE g.graph_kernels > 0 ORDER BY 1"""
            )
        ]
    pct = mean(r["graph_pct"] for r in covered)
    return [
        ctx.finding(
            id="cuda-graphs",
            title=f"CUDA graphs replay {pct:.0f} % of kernel time",
            kind="capture",
            summary=f"{pct:.1f} % of kernel time on {len(covered)} rank(s) comes from {launches} "
            f"graph launches: "
            "launch gaps inside a graph are not host launch cost, and per-kernel launch attribution "
            "(which API call issued which kernel) is the graph launch's.",
            ranks=[int(r["rank"]) for r in covered],
            steps=steps,
            recoverable_ns_per_step=None,
            recoverable_method="not a performance problem: no recoverable time",
            metrics={"graph_time_pct": pct, "graph_launches": launches},
            evidence=ev,
            signals=[
                Signal(
                    "graph launches",
                    launches,
                    "calls",
                    "neutral",
                    "each replays many kernels for one host call",
                )
            ],
            fixes=_graph_trace_fixes(ctx, [int(r["rank"]) for r in covered]),
        )
    ]


# What a graph replay hides and how to see it depends on what recorded the trace.
_GRAPH_FIXES = {
    # an Nsight Systems capture whose graph kernels carry no node id: traced per graph
    "nsys": Fix(
        "For per-kernel detail inside the graphs, capture again with nsys --cuda-graph-trace=node "
        "(the default traces each graph launch as one range)",
        "higher tracing overhead: node-level tracing adds a record per kernel of every replay",
    ),
    # an Nsight Systems capture whose graph kernels carry graph and node ids: already node level
    "nsys-node": Fix(
        "Nothing to change in the capture: it is already traced per graph node (each kernel with its "
        "graph and node id); to attribute a node to the code that recorded it, profile the capture "
        "phase too (NVTX ranges around the captured region) or one step with graphs off",
        "an eager step pays the launch cost the graph hides: time it apart from the replay",
    ),
    # PyTorch profiler on CUDA: CUPTI records every replayed kernel, correlated to the graph launch
    "kineto": Fix(
        "Nothing to change for per-kernel times: the PyTorch profiler already records every kernel a "
        "graph replays, linked to its cudaGraphLaunch by correlation id (nsys --cuda-graph-trace=node "
        "does not add kernels it lacks). To see which op issued each kernel, profile one step with "
        "graphs off (torch.compile without mode='reduce-overhead', vLLM --enforce-eager) or the capture",
        "an eager step pays the launch cost the graph hides: time it apart from the replay",
    ),
    # PyTorch profiler on ROCm (roctracer): the same, and nsys's flag does not exist there
    "kineto-rocm": Fix(
        "Nothing to change for per-kernel times: the ROCm tracer already records every kernel a "
        "hipGraphLaunch replays (nsys --cuda-graph-trace=node does not apply to AMD GPUs). To see "
        "which op issued each kernel, profile the capture (hipStreamBeginCapture to EndCapture) or one "
        "step with graphs off (vLLM --enforce-eager)",
        "an eager step pays the launch cost the graph hides: time it apart from the replay",
    ),
}


def _graph_trace_fixes(ctx: Ctx, ranks: list[int]) -> list[Fix]:
    """The fix that fits what recorded the graph-covered ranks: nsys (traced per graph or already per
    node), the PyTorch profiler on CUDA, or on ROCm (its tracer, gpus.VENDOR_SQL, or HIP graph
    launches). Why: `--cuda-graph-trace=node` is an nsys flag; a Kineto trace already holds each
    replayed kernel and a ROCm one has no such flag, so offering it there sends the engineer to a
    capture that changes nothing."""
    if not ranks or not ctx.has("ranks", "files"):
        return []
    hip = (
        "(SELECT DISTINCT rank FROM api_summary WHERE is_graph_launch(name) AND name LIKE 'hip%')"
        if ctx.has("api_summary", "is_graph_launch")
        else "(SELECT NULL::INTEGER AS rank WHERE FALSE)"
    )
    node = (
        "(SELECT DISTINCT rank FROM kernels WHERE graph_node_id IS NOT NULL)"
        if ctx.has("kernels")
        else "(SELECT NULL::INTEGER AS rank WHERE FALSE)"
    )
    kinds = ctx.column(
        f"""SELECT DISTINCT CASE
                   WHEN f.source_format IN ('nsys-sqlite', 'nsys-recipe')
                       THEN CASE WHEN r.rank IN {node} THEN 'nsys-node' ELSE 'nsys' END
                   WHEN f.source_format = 'kineto-json'
                       THEN CASE WHEN ({VENDOR_SQL}) = 'amd' OR r.rank IN {hip} THEN 'kineto-rocm'
                                 ELSE 'kineto' END
                   END AS kind
            FROM ranks r JOIN files f ON f.file_id = r.file_id
            WHERE r.rank IN ({", ".join(str(int(x)) for x in ranks)})
            ORDER BY kind"""
    )
    return [_GRAPH_FIXES[k] for k in kinds if k in _GRAPH_FIXES]


def graph_capture(ctx: Ctx) -> list[Finding]:
    """CUDA/HIP-graph capture or instantiation in the trace: one-time work, not the steady state.

    While a stream is captured, launch calls record graph nodes and run nothing, so the GPU idles
    for as long as the host captures. Read as steady state that is a host-bound, launch-bound trace
    whose advice is the CUDA graph being recorded; the steady-state rules leave this idle out
    (capture_idle) and this note says why. torch.compile compilation (capture_phases kind
    'torch_compile') is one-time work of the same sort and gets its own note, `compile-phase`.
    """
    if not ctx.has("capture_phases"):
        return []
    return _graph_capture_note(ctx) + _compile_note(ctx)


def _graph_capture_note(ctx: Ctx) -> list[Finding]:
    """The graph-capture note: stream captures and instantiations (capture_phases' graph kinds)."""
    phases = ctx.rows(
        f"""SELECT rank, count(*) FILTER (WHERE kind = 'graph_capture') AS captures,
                  count(*) FILTER (WHERE kind = 'graph_instantiate') AS instantiations,
                  sum(end_ns - start_ns) AS phase_ns, sum(launches) AS launches,
                  sum(launches_run) FILTER (WHERE kind = 'graph_capture') AS launches_run,
                  sum(launches) FILTER (WHERE kind = 'graph_capture') AS captured
           FROM capture_phases WHERE {_GRAPH_KINDS} GROUP BY rank ORDER BY rank"""
    )
    if not phases:
        return []
    idle = (
        ctx.scalar(
            "SELECT coalesce(sum(graph_idle_ns), 0) FROM capture_idle WHERE "
            + ("step IS NOT NULL" if ctx.has_steps else "step IS NULL")
        )
        if ctx.has("capture_idle")
        else None
    )
    captured = int(sum(int(r["captured"] or 0) for r in phases))
    ran = int(sum(int(r["launches_run"] or 0) for r in phases))
    captures = int(sum(int(r["captures"] or 0) for r in phases))
    inst = int(sum(int(r["instantiations"] or 0) for r in phases))
    phase_ns = int(sum(int(r["phase_ns"] or 0) for r in phases))
    return [
        ctx.finding(
            id="graph-capture",
            title=f"CUDA/HIP-graph capture in the trace: {phase_ns / 1e6:.3f} ms of one-time work, "
            "not steady state",
            kind="capture",
            summary=f"{captures} stream capture(s) and {inst} graph instantiation(s) last "
            f"{phase_ns / 1e6:.3f} ms of host time; {captured} launch call(s) inside the captures "
            f"recorded graph nodes ({ran} ran on the GPU)"
            + (f", and the GPU idled {idle / 1e6:.3f} ms meanwhile" if idle else "")
            + ". This is start-up work paid once: the launch-bound, host-bound, low-utilisation and "
            "CUDA-graph findings leave it out; profile the replay (steady state) to judge those.",
            ranks=[int(r["rank"]) for r in phases],
            steps=[],
            recoverable_ns_per_step=None,
            recoverable_method="not a performance problem: no recoverable time",
            metrics={
                "captures": captures,
                "instantiations": inst,
                "phase_ns": phase_ns,
                "captured_launches": captured,
                "captured_launches_run": ran,
                "capture_idle_ns": idle,
            },
            evidence=[
                ctx.evidence(
                    "capture phases",
                    "Stream capture (BeginCapture to EndCapture) and graph instantiation calls, with the "
                    "launch calls inside and how many of them ran (capture_phases).",
                    f"SELECT * FROM capture_phases WHERE {_GRAPH_KINDS} ORDER BY rank, start_ns, tid",
                )
            ]
            + (
                [
                    ctx.evidence(
                        "GPU idle during capture",
                        "Launch-gap and host-bound idle inside the capture phases, per window "
                        "(capture_idle.graph_idle_ns); left out of the steady-state findings.",
                        "SELECT rank, step, graph_idle_ns, idle_ns, phase_ns FROM capture_idle "
                        "WHERE graph_idle_ns > 0 ORDER BY rank, step",
                    )
                ]
                if ctx.has("capture_idle")
                else []
            ),
            signals=[
                Signal(
                    "captured launch calls that ran",
                    ran,
                    "calls",
                    "supports" if ran == 0 else "neutral",
                    f"of {captured}: a captured launch records a graph node and runs nothing",
                )
            ],
            fixes=[
                Fix(
                    "Profile the graph replays (start the profiler after warm-up and capture) to see the "
                    "steady state",
                    "the capture itself is not in that profile",
                )
            ],
        )
    ]


_GRAPH_KINDS = "kind IN ('graph_capture', 'graph_instantiate')"


def _compile_note(ctx: Ctx) -> list[Finding]:
    """The compile-phase note: torch.compile compilation in the trace (capture_phases 'torch_compile',
    from PyTorch's `dynamo_timed` ranges).

    Why: the first call of a compiled graph spends seconds in Dynamo, AOT autograd, Inductor and
    Triton (compiling, autotuning) while the GPU idles; read as steady state that is a host-bound
    trace with GPU starvation. The steady-state rules leave that idle out (capture_idle,
    capture_phases) and this note says why. Compilation in more than one step is recompilation:
    still left out of those findings, but named, because it is paid again each time a guard fails.
    """
    phases = ctx.rows(
        """SELECT rank, count(*) AS phases, sum(end_ns - start_ns) AS phase_ns,
                  sum(launches) AS launches, sum(launches_run) AS launches_run,
                  arg_max(name, struct_pack(d := end_ns - start_ns, s := -start_ns, n := name)) AS longest
           FROM capture_phases WHERE kind = 'torch_compile' GROUP BY rank ORDER BY rank"""
    )
    if not phases:
        return []
    where = "step IS NOT NULL" if ctx.has_steps else "step IS NULL"
    idle = (
        ctx.scalar(f"SELECT coalesce(sum(compile_idle_ns), 0) FROM capture_idle WHERE {where}")
        if ctx.has("capture_idle")
        else None
    )
    steps = (
        [
            int(s)
            for s in ctx.column(
                # each phase in the one step window it overlaps most (a phase may run past the
                # GPU-projected end of its step's window: that is not a second compiling step)
                """SELECT DISTINCT step FROM (
                       SELECT p.rank, p.tid, p.start_ns,
                              arg_max(s.step, struct_pack(o := least(p.end_ns, s.end_ns)
                                                               - greatest(p.start_ns, s.start_ns),
                                                          n := -s.step)) AS step
                       FROM capture_phases p JOIN steps s
                         ON s.rank = p.rank AND p.start_ns < s.end_ns AND p.end_ns > s.start_ns
                       WHERE p.kind = 'torch_compile' AND s.step IS NOT NULL
                       GROUP BY p.rank, p.tid, p.start_ns)
                   ORDER BY 1"""
            )
        ]
        if ctx.has_steps and ctx.has("steps")
        else []
    )
    phase_ns = int(sum(int(r["phase_ns"] or 0) for r in phases))
    n = int(sum(int(r["phases"]) for r in phases))
    ran = int(sum(int(r["launches_run"] or 0) for r in phases))
    longest = max(phases, key=lambda r: (int(r["phase_ns"] or 0), -int(r["rank"])))["longest"]
    recompiles = len(steps) > 1
    ms = phase_ns / 1e6
    where_steps = (
        f" It falls in step(s) {', '.join(map(str, steps))}, whose step time includes it." if steps else ""
    )
    return [
        ctx.finding(
            id="compile-phase",
            title=(
                f"torch.compile recompiled in {len(steps)} steps: {ms:.3f} ms of host time"
                if recompiles
                else f"torch.compile compilation in the trace: {ms:.3f} ms of one-time host work, "
                "not steady state"
            ),
            kind="capture",
            summary=f"torch.compile compilation: {ms:.3f} ms of host time, "
            + (f"in {len(steps)} steps" if recompiles else "one-time")
            + f" ({n} phase(s) of "
            f"nested `dynamo_timed` ranges on {len(phases)} rank(s), the longest `{longest}`"
            + (
                f"; inside the analysed {'steps' if ctx.has_steps else 'capture'} the GPU idled "
                f"{idle / 1e6:.3f} ms of it"
                if idle
                else ""
            )
            + (f" and ran {ran} launch(es) issued inside it, autotuning benchmarks" if ran else "")
            + ")."
            + where_steps
            + " The launch-bound, host-bound, GPU-starvation, low-utilisation and CUDA-graph findings "
            "leave it out; profile after warm-up (steady state) to judge those."
            + (
                f" Compilation in {len(steps)} steps is recompilation, paid again whenever a guard "
                "fails (new shapes, dtypes or Python values): it is not one-time if it keeps recurring."
                if recompiles
                else ""
            ),
            ranks=[int(r["rank"]) for r in phases],
            steps=steps,
            recoverable_ns_per_step=None,
            recoverable_method="not a performance problem: no recoverable time",
            metrics={
                "compile_phases": n,
                "compile_ns": phase_ns,
                "compile_idle_ns": idle,
                "compile_launches_run": ran,
                "compile_steps": steps,
            },
            evidence=[
                ctx.evidence(
                    "compile phases",
                    "torch.compile phases: runs of nested `... (dynamo_timed)` ranges per thread, with "
                    "the launch calls inside and how many ran (capture_phases, kind torch_compile).",
                    "SELECT * FROM capture_phases WHERE kind = 'torch_compile' ORDER BY rank, start_ns, tid",
                ),
                ctx.evidence(
                    "compile ranges",
                    "The `dynamo_timed` ranges themselves, longest first (nvtx: Kineto user annotations "
                    "and NVTX ranges).",
                    """SELECT rank, tid, text, start_ns, end_ns, end_ns - start_ns AS duration_ns FROM nvtx
                       WHERE regexp_matches(text, ' \\(dynamo_timed\\)($|, )') AND end_ns IS NOT NULL
                       ORDER BY duration_ns DESC, rank, start_ns, text""",
                ),
            ]
            + (
                [
                    ctx.evidence(
                        "GPU idle during compilation",
                        "Launch-gap and host-bound idle inside the compile phases, per window "
                        "(capture_idle.compile_idle_ns); left out of the steady-state findings.",
                        "SELECT rank, step, compile_idle_ns, idle_ns, phase_ns FROM capture_idle "
                        "WHERE compile_idle_ns > 0 ORDER BY rank, step",
                    )
                ]
                if ctx.has("capture_idle")
                else []
            ),
            signals=[
                Signal(
                    "steps holding compilation",
                    len(steps),
                    "steps",
                    "against" if recompiles else "supports",
                    "one step: a first call compiling; more: recompilation (TORCH_LOGS=recompiles says why)"
                    if ctx.has_steps
                    else "no steps found: the whole capture is one window",
                )
            ],
            fixes=(
                [
                    Fix(
                        "Find why it recompiles (TORCH_LOGS=recompiles), then mark the varying dimensions "
                        "dynamic (torch._dynamo.mark_dynamic, dynamic=True) or pad/bucket the shapes",
                        "dynamic shapes can compile to slower kernels than static ones",
                    )
                ]
                if recompiles
                else []
            )
            + [
                Fix(
                    "Profile after warm-up (a profiler schedule with wait/warmup steps, or start it after "
                    "the first compiled steps) to see the steady state; to shorten start-up, reuse "
                    "compiled artefacts (the Inductor FX-graph and autotune caches, "
                    "TORCHINDUCTOR_CACHE_DIR on persistent storage, torch.compiler.save_cache_artifacts)",
                    "the compilation itself is not in that profile",
                )
            ],
        )
    ]


def corrupt_timing(ctx: Ctx) -> list[Finding]:
    """Files whose trace times are corrupt for some rows (the ingest's CORRUPT_TIMING warnings:
    rows that end before they start, GPU work ending long after the capture): every other
    finding reads the partition those rows distort, so this one comes first."""
    if not ctx.has("files", "ranks"):
        return []
    cut = len(CORRUPT_TIMING) + 1
    sql = f"SELECT path, ranks, substr(warning, {cut}) AS warning FROM ({CORRUPT_TIMING_SQL})"
    found = ctx.rows(sql)
    if not found:
        return []
    ranks = sorted({int(r) for f in found for r in f["ranks"]})
    files = len({f["path"] for f in found})
    return [
        ctx.finding(
            id="corrupt-timing",
            title=f"Corrupt timestamps in {files} file(s): the partition of rank(s) "
            f"{', '.join(map(str, ranks))} is distorted",
            kind="capture",
            severity="medium",
            summary=f"{len(found)} warning(s) of the ingest say some rows' times cannot be true ("
            + "; ".join(f["warning"] for f in found[:3])
            + "). The windows, idle time and shares of these ranks, and every finding built on them, "
            "are read from those rows as recorded.",
            ranks=ranks,
            steps=[],
            recoverable_ns_per_step=None,
            recoverable_method="not a performance problem: no recoverable time",
            metrics={"files": int(files), "warnings": int(len(found))},
            evidence=[
                ctx.evidence("files with corrupt timing", "The ingest's warnings (files.warnings).", sql)
            ],
            signals=[],
            fixes=[
                Fix(
                    "Capture again (a clean exit of the profiled process; a current nsys and driver); "
                    "or read these ranks' numbers only where the warned rows do not fall",
                    "a new capture costs a run",
                )
            ],
        )
    ]


def unclassified_kernels(ctx: Ctx) -> list[Finding]:
    """More than `unclassified_max_pct` % of kernel time in category 'other' (no kernel rule
    matched): the partition's compute and memory columns are the rules' verdicts, so the
    memory-bound, compute-efficiency and fusion findings read a split that much time is missing
    from. Kernel time over all ranks (kernel_summary), as `classify` shows it."""
    if not ctx.has("kernel_summary"):
        return []
    share = unclassified_share(ctx.con)
    if share is None or share[0] <= ctx.th["unclassified_max_pct"]:
        return []
    pct, names = share
    ranks = [
        int(r)
        for r in ctx.column("SELECT DISTINCT rank FROM kernel_summary WHERE category = 'other' ORDER BY rank")
    ]
    return [
        ctx.finding(
            id="unclassified-kernels",
            title=f"{pct:.0f} % of kernel time is unclassified: the compute/memory split is uncertain",
            kind="capture",
            severity="medium",
            summary=unclassified_note(pct, names) + ".",
            ranks=ranks,
            steps=[],
            recoverable_ns_per_step=None,
            recoverable_method="not a performance problem: no recoverable time",
            metrics={"unclassified_pct": round(pct, 2), "unclassified_names": names},
            evidence=[
                ctx.evidence(
                    "unclassified kernels",
                    "Kernel names no rule of data/kernel_rules.csv (or the stored --rules) matches, "
                    "largest first, all ranks (kernel_summary, as `classify --list-other`).",
                    """SELECT name, sum(instances) AS instances, count(DISTINCT rank) AS ranks,
                              sum(total_ns) AS total_ns,
                              round(100.0 * sum(total_ns)
                                    / (SELECT sum(total_ns) FROM kernel_summary), 2) AS pct
                       FROM kernel_summary WHERE category = 'other'
                       GROUP BY name ORDER BY total_ns DESC, name""",
                )
            ],
            signals=[],
            fixes=[
                Fix(
                    "Classify them: `nsight-analyze classify --rules FILE` with a line per kernel "
                    "family (priority,pattern,category,subcategory,note); later ingests keep the rules",
                    "a regex per family; the rules are the user's claim of what each kernel does",
                )
            ],
        )
    ]
