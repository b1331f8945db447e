"""Diagnosis rules, one module per finding (named after it; a family's shared helpers in `_private`
modules beside them: `_idle`, `_window_steps`, `_gemm_ops`, `_common`, `_whatif`; what precisions
a GPU takes in `precision`; the one list of communication fixes in `comm_families`). Each rule
takes a `base.Ctx` and returns findings (`base.Rule`); this list is the registry `diagnose()`
runs.

The order of RULES does not matter: `diagnose()` ranks the findings by recoverable time.
"""

from __future__ import annotations

from . import (
    clock_skew,
    comms,
    corrupt_timing,
    cuda_graphs,
    dimensions,
    dominant_kernel,
    efficiency,
    gemm_precision,
    graph_capture,
    host_device_copies,
    input_stall,
    kernel_fixes,
    launch_bound,
    low_occupancy,
    memory_bound,
    nsys,
    slow_rank,
    synchronisation,
    unaligned_gemm,
    unclassified_kernels,
)

RULES = [
    input_stall.input_stall,
    synchronisation.synchronisation,
    launch_bound.launch_bound,
    comms.exposed_comm,
    dimensions.comm_by_dimension,
    comms.imbalance,
    low_occupancy.low_occupancy,
    memory_bound.memory_bound,
    dominant_kernel.dominant_kernel,
    host_device_copies.host_device_copies,
    nsys.gpu_starvation,
    nsys.low_utilisation,
    corrupt_timing.corrupt_timing,
    clock_skew.clock_skew,
    cuda_graphs.cuda_graphs,
    graph_capture.graph_capture,
    unclassified_kernels.unclassified_kernels,
    efficiency.compute_efficiency,
    kernel_fixes.fusion_candidates,
    kernel_fixes.unfused_attention,
    gemm_precision.gemm_precision,
    unaligned_gemm.unaligned_gemm,
    kernel_fixes.cuda_graph_candidates,
    slow_rank.slow_rank,
]

__all__ = ["RULES"]
