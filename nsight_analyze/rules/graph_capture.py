"""The `graph-capture` and `compile-phase` capture findings: CUDA/HIP-graph capture or
instantiation, and torch.compile compilation, in the trace: one-time work, not the steady state.

Why a module of its own: both notes read the one-time phases (capture_phases) and the idle inside
them (capture_idle) that the steady-state rules leave out; the rule says why those findings do.
A capture finding is a fact about the trace that changes how every other finding must be read:
it has no recoverable time and is listed before the performance findings.
"""

from __future__ import annotations

from ..store.query_layer import statements
from .base import Ctx, Finding, Fix, Signal
from .declare import Doc, finding

SQL = statements("rules/graph_capture")


@finding(
    "graph-capture",
    doc=Doc(
        what=(
            "CUDA/HIP-graph capture (Stream BeginCapture to EndCapture) or instantiation in the trace: "
            "one-time work, not steady state; says how many launch calls the capture recorded and how "
            "many ran (a captured launch runs nothing) and the GPU idle meanwhile. `launch-bound` / "
            "`host-bound` leave that idle out (`capture_idle`), and `gpu-starvation`, "
            "`gpu-low-utilisation` and `cuda-graph-candidates` leave out the windows / regions a "
            "capture phase spans"
        ),
        source="`capture_phases`, `capture_idle`",
        recoverable="none (capture)",
    ),
    reads=("capture_idle", "capture_phases"),
)
@finding(
    "compile-phase",
    doc=Doc(
        what=(
            "torch.compile compilation in the trace: PyTorch 2.x wraps each compile step in "
            "`dynamo_timed`, which records a range `<key> (dynamo_timed)` (`_compile.compile_inner`, "
            "`compile_fx_inner`, `CachingAutotuner.benchmark_all_configs`, ...; Kineto "
            "`user_annotation`s and NVTX ranges alike); nested ranges of one thread are one phase "
            "(`capture_phases` kind `torch_compile`). The runtime markers of compiled code "
            "(`Torch-Compiled Region`, `CompiledFunction`, `## Call CompiledFxGraph ... ##`, "
            '`TorchDynamo Cache Lookup`) are not compilation. Says the host time ("torch.compile '
            'compilation: N ms of host time, one-time"), the GPU idle meanwhile '
            "(`capture_idle.compile_idle_ns`), the launches that ran inside (autotuning benchmarks) and "
            "the steps holding it (their step time includes it); metrics `compile_phases`, "
            "`compile_ns`, `compile_idle_ns`, `compile_launches_run`, `compile_steps`. Compilation in "
            "more than one step is named recompilation (with a `TORCH_LOGS=recompiles` fix). The "
            "steady-state findings leave it out as they do graph capture: `launch-bound` / `host-bound` "
            "(`capture_idle.idle_ns`), `gpu-starvation`, `gpu-low-utilisation` and "
            "`cuda-graph-candidates` (gaps, windows and regions a phase spans half of / overlaps)"
        ),
        source="`capture_phases`, `capture_idle`, `nvtx`",
        recoverable="none (capture)",
    ),
    reads=("capture_idle", "capture_phases"),
)
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
    phases = ctx.rows(SQL["graph_phases_per_rank"])
    if not phases:
        return []
    idle = ctx.scalar(SQL.sql("graph_idle_total", in_steps=ctx.in_steps)) if ctx.has("capture_idle") else None
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
                    SQL["graph_phases"],
                )
            ]
            + (
                [
                    ctx.evidence(
                        "GPU idle during capture",
                        "Launch-gap and host-bound idle inside the capture phases, per window "
                        "(capture_idle.graph_idle_ns); left out of the steady-state findings.",
                        SQL["graph_idle_per_window"],
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


def _compile_note(ctx: Ctx) -> list[Finding]:
    """The compile-phase note: torch.compile compilation in the trace (capture_phases 'torch_compile',
    from PyTorch's `dynamo_timed` ranges).

    Why: the first call of a compiled graph spends seconds in Dynamo, AOT autograd, Inductor and
    Triton (compiling, autotuning) while the GPU idles; read as steady state that is a host-bound
    trace with GPU starvation. The steady-state rules leave that idle out (capture_idle,
    capture_phases) and this note says why. Compilation in more than one step is recompilation:
    still left out of those findings, but named, because it is paid again each time a guard fails.
    """
    phases = ctx.rows(SQL["compile_phases_per_rank"])
    if not phases:
        return []
    idle = (
        ctx.scalar(SQL.sql("compile_idle_total", in_steps=ctx.in_steps)) if ctx.has("capture_idle") else None
    )
    # each phase in the one step window it overlaps most (compile_steps)
    steps = [int(s) for s in ctx.column(SQL["compile_steps"])] if ctx.has_steps and ctx.has("steps") else []
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
                    SQL["compile_phases"],
                ),
                ctx.evidence(
                    "compile ranges",
                    "The `dynamo_timed` ranges themselves, longest first (nvtx: Kineto user annotations "
                    "and NVTX ranges).",
                    SQL.sql("compile_ranges"),
                ),
            ]
            + (
                [
                    ctx.evidence(
                        "GPU idle during compilation",
                        "Launch-gap and host-bound idle inside the compile phases, per window "
                        "(capture_idle.compile_idle_ns); left out of the steady-state findings.",
                        SQL["compile_idle_per_window"],
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
