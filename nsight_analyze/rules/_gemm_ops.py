"""The PyTorch op that launched each GEMM kernel, for the GEMM rules that read shapes and dtypes.

Why a module of its own: `gemm-precision` (the ops' input dtypes, rules/gemm_precision.py) and
`unaligned-gemm` (the ops' M, N, K, rules/unaligned_gemm.py) join a GEMM kernel to its op the same
way; one definition of that join (queries/rules/_gemm_ops.sql).
"""

from __future__ import annotations

from ..store.query_layer import statements

SQL = statements("rules/_gemm_ops")


def op_gemms(where: str) -> str:
    """SQL: the GEMM kernels matching `where` (over kernels k) with the op that launched each
    (queries/rules/_gemm_ops.sql, op_gemms: the leaf matmul op of op_flops around the launch, its A
    operand's dtype and M/N/K; op columns NULL where the trace recorded no shapes)."""
    return SQL.sql("op_gemms", where=where)
