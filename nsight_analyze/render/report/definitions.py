"""Plain-words definitions of every metric the report shows (docs/metrics.md is the contract).

Why here and not scraped from docs: the report must be readable offline on its own; the words
are kept short and say which view each number comes from so a reader can re-query it.
"""

from __future__ import annotations

DEFINITIONS: tuple[tuple[str, str], ...] = (
    (
        "window",
        "The span a number covers: the whole capture (first to last GPU operation of the rank) or "
        "one step window. Step windows tile the GPU timeline; the idle time before a step's first "
        "kernel belongs to that step. View: steps.",
    ),
    (
        "step time",
        "Length of a step window. Per step, the job's step time is the slowest rank's window; "
        "the headline gives the median over steps and the spread (min to max).",
    ),
    (
        "compute",
        "Time at least one compute kernel (GEMM, convolution, attention, ...) runs. View: time_partition.",
    ),
    (
        "memory (kernels + copies)",
        "Time memory-bound kernels or copies/memsets run while no compute kernel runs: memory kernels "
        "+ copies, exactly.",
    ),
    (
        "memory kernels",
        "Time memory-bound kernels (softmax, norms, elementwise, ...) run while no compute kernel "
        "runs: their part of memory. View: time_partition.memory_kernels_ns.",
    ),
    (
        "copies",
        "Time copies or memsets (memcpy / memset; peer and NCCL copies are comms) run while no compute "
        "or memory kernel runs: their part of memory. View: time_partition.copies_ns.",
    ),
    (
        "copies incl. hidden",
        "All time copies or memsets run, hidden behind kernels or not (not a part of the window). "
        "View: time_partition.copies_total_ns.",
    ),
    ("other", "Time kernels of no known category run while no compute or memory work runs."),
    (
        "comms exposed",
        "Time communication (NCCL kernels, peer copies) runs while nothing else runs: "
        "communication not hidden behind other GPU work.",
    ),
    (
        "idle",
        "Time no GPU operation of the rank runs. Compute + memory + other + comms exposed + idle "
        "= window, exactly.",
    ),
    ("launch gap", "Idle while the launch call of the next operation was in flight (launch latency)."),
    ("input stall", "Idle while the host was in an input-pipeline NVTX range (data loader)."),
    ("sync stall", "Idle while the host was blocked in a synchronising CUDA call."),
    ("host bound", "Idle while the host was doing other work before launching the next operation."),
    (
        "idle other",
        "Idle the host does not explain: the work was already queued (dependency wait) or the "
        "gap runs to the end of the window.",
    ),
    ("GPU busy %", "100 × (window − idle) / window, over all ranks together."),
    ("exposed comms %", "100 × comms exposed / window, over all ranks together."),
    (
        "overlap %",
        "100 × communication hidden behind compute, memory or other work / all communication time.",
    ),
    (
        "imbalance verdict",
        "balanced: median max/mean compute ratio over steps below the threshold (1.05); "
        "persistent: one rank is slowest in most imbalanced steps (the straggler); rotating: "
        "the slowest rank changes. View: merge_straggler_verdict, imbalance.",
    ),
    (
        "overlap per collective",
        "For each NCCL operation type: the share of its kernels' time during which compute, memory or "
        "other work ran on the rank; exposed while waiting = exposed time before the last rank arrived. "
        "View: diag_comm_exposure.",
    ),
    (
        "arrival skew",
        "For one collective instance matched across ranks: last arrival − first arrival "
        "(aligned kernel starts). View: collectives.",
    ),
    (
        "wait suffered / caused",
        "Time a rank's NCCL kernel waited for the last participant; the other ranks' "
        "wait charged to the rank that arrived last. View: collective_waits, rank_rollup.",
    ),
    ("MFU", "Model FLOPs per step / (step time × per-GPU dense peak × GPUs); needs the model's FLOPs."),
    ("HFU", "FLOPs counted by Nsight Compute on the timeline's kernels / (window × dense peak)."),
    (
        "clock-alignment residual",
        "After aligning the ranks' clocks, the median (p50) and 95th percentile "
        "of |a rank's collective end − the instance's median end|. View: alignment_quality.",
    ),
    ("top kernels", "Kernel names by GPU time summed over ranks; count = launches. View: kernel_summary."),
    (
        "launch latency",
        "Kernel start − end of its launch call; queue depth = launched but not yet started "
        "operations. View: launch_stats.",
    ),
    ("recoverable time", "Upper bound of the step time a finding's fix could save, per step (diagnose)."),
    (
        "timeline",
        "GPU operations of every rank on the aligned job timeline (file time + the rank's clock "
        "offset), one lane group per rank: compute (and other), memory, comms, idle by cause.",
    ),
)
