-- The statements of the `gemm-precision` finding (nsight_analyze/rules/gemm_precision.py).
-- $op_gemms: rules/_gemm_ops.py's op_gemms over the kernels a predicate below picks;
-- $op_precision: the statement op_precision.

-- name: op_precision
-- The precision of a PyTorch `Input type` (c10::BFloat16, c10::Half, float, c10::Float8_*) in
-- column dtype.
CASE WHEN regexp_matches(dtype, '(?i)float8') THEN 'fp8'
WHEN regexp_matches(dtype, '(?i)bfloat16') THEN 'bf16'
WHEN regexp_matches(dtype, '(?i)half') THEN 'fp16'
WHEN regexp_matches(dtype, '(?i)double') THEN 'fp64'
WHEN regexp_matches(dtype, '(?i)float') THEN 'fp32' END

-- name: unnamed_gemms
-- The GEMM kernels whose names state no type (cuBLASLt nvjet, Triton): a predicate over kernels k.
gemm_precision(k.name) IS NULL

-- name: fp32_tf32_gemms
-- The GEMM kernels whose names say FP32 or TF32: a predicate over kernels k.
gemm_precision(k.name) IN ('fp32', 'tf32')

-- name: unnamed_float_gemms
-- Per rank, the unnamed GEMMs launched by an op whose first input is float, as rows (rank,
-- precision 'float', ns, n) like the per-precision rows.
SELECT rank, 'float' AS precision, sum(duration_ns) AS ns, count(*) AS n
FROM (
    $op_gemms)
WHERE $op_precision = 'fp32' GROUP BY rank

-- name: op_dtypes
-- The FP32/TF32-named GEMM kernels by the input dtype of the op that launched them.
SELECT name_precision, $op_precision AS op_precision, dtype AS op_dtype, op,
       count(*) AS launches, sum(duration_ns) AS kernel_ns,
       list(DISTINCT rank ORDER BY rank) AS ranks,
       arg_max(name, (duration_ns, name)) AS example
FROM (
    $op_gemms)
GROUP BY ALL ORDER BY kernel_ns DESC, op, op_dtype, name_precision

-- name: gemm_per_rank_precision
-- GEMM kernel time and launches per rank and the precision the names state.
SELECT rank, gemm_precision(name) AS precision, sum(total_ns) AS ns, sum(instances) AS n
FROM kernel_summary WHERE subcategory = 'gemm' GROUP BY 1, 2

-- name: gemms_by_precision
-- GEMM kernels by the precision their names state, all ranks, whole capture.
SELECT gemm_precision(name) AS precision, name, sum(instances) AS launches,
       sum(total_ns) AS total_ns, round(avg(avg_ns), 1) AS avg_ns,
       list(DISTINCT rank ORDER BY rank) AS ranks
FROM kernel_summary WHERE subcategory = 'gemm'
GROUP BY 1, 2 ORDER BY precision IN ('fp32', 'tf32') DESC, total_ns DESC, name
