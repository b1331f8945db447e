"""Diagnosis rules, one module per family. Each rule takes a `diagnose.Ctx` and returns findings.

The order of RULES does not matter: `diagnose()` ranks the findings by recoverable time.
"""

from __future__ import annotations

from . import capture, comms, efficiency, idle, kernel_fixes, kernels, nsys, slow_rank

RULES = [
    idle.input_stall,
    idle.synchronisation,
    idle.launch_bound,
    comms.exposed_comm,
    comms.imbalance,
    kernels.low_occupancy,
    kernels.memory_bound,
    kernels.dominant_kernel,
    kernels.host_device_copies,
    nsys.gpu_starvation,
    nsys.low_utilisation,
    capture.clock_skew,
    capture.cuda_graphs,
    efficiency.compute_efficiency,
    kernel_fixes.fusion_candidates,
    kernel_fixes.unfused_attention,
    kernel_fixes.gemm_precision,
    kernel_fixes.cuda_graph_candidates,
    slow_rank.slow_rank,
]

__all__ = ["RULES"]
