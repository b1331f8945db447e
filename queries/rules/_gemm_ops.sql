-- The statements of the op that launched each GEMM kernel (nsight_analyze/rules/_gemm_ops.py).

-- name: op_gemms
-- The GEMM kernels matching $where (over kernels k) with the op that launched each: the leaf
-- matmul op of op_flops (Kineto record_shapes) on the launch's thread whose span holds the launch
-- (cuda_api of the kernel's correlation id), with its A operand's dtype (addmm / baddbmm list the
-- bias first) and M/N/K; op columns NULL where the trace recorded no shapes.
WITH k AS (
    SELECT k.rank, k.name, k.duration_ns, a.tid, a.start_ns AS launch_ns
    FROM kernels k JOIN cuda_api a ON a.rank = k.rank AND a.correlation_id = k.correlation_id
    WHERE k.subcategory = 'gemm' AND ($where)
)
SELECT k.rank, k.name, gemm_precision(k.name) AS name_precision, k.duration_ns, o.op,
       CASE WHEN o.op IN ('aten::addmm', 'aten::baddbmm') THEN o.input_types[2]
            ELSE o.input_types[1] END AS dtype,
       o.batch, o.m, o.n, o.k
FROM k LEFT JOIN op_flops o ON o.rank = k.rank AND o.tid = k.tid AND o.kind = 'gemm'
    AND k.launch_ns BETWEEN o.start_ns AND o.end_ns
