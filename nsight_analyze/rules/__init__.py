"""Diagnosis rules, one module per family. Each rule takes a `base.Ctx` and returns findings
(`base.Rule`); this list is the registry `diagnose()` runs.

The order of RULES does not matter: `diagnose()` ranks the findings by recoverable time.
"""

from __future__ import annotations

from . import capture, comms, dimensions, efficiency, idle, kernel_fixes, kernels, nsys, precision, slow_rank

RULES = [
    idle.input_stall,
    idle.synchronisation,
    idle.launch_bound,
    comms.exposed_comm,
    dimensions.comm_by_dimension,
    comms.imbalance,
    kernels.low_occupancy,
    kernels.memory_bound,
    kernels.dominant_kernel,
    kernels.host_device_copies,
    nsys.gpu_starvation,
    nsys.low_utilisation,
    capture.corrupt_timing,
    capture.clock_skew,
    capture.cuda_graphs,
    capture.graph_capture,
    capture.unclassified_kernels,
    efficiency.compute_efficiency,
    kernel_fixes.fusion_candidates,
    kernel_fixes.unfused_attention,
    precision.gemm_precision,
    precision.unaligned_gemm,
    kernel_fixes.cuda_graph_candidates,
    slow_rank.slow_rank,
]

__all__ = ["RULES"]
