-- The statements of the `unaligned-gemm` finding (nsight_analyze/rules/unaligned_gemm.py).
-- $unaligned: the statement unaligned over column name; $elem_bytes: elem_bytes over column name.

-- name: elem_bytes
-- Bytes per element of each GEMM input precision of the kernel name in column $column; a name
-- with no type counts as 8 (the widest), so only what is unaligned for every type is flagged
-- (align1: 8 bytes at most).
CASE gemm_precision($column) WHEN 'fp8' THEN 1 WHEN 'int8' THEN 1 WHEN 'bf16' THEN 2 WHEN 'fp16' THEN 2
WHEN 'tf32' THEN 4 WHEN 'fp32' THEN 4 ELSE 8 END

-- name: unaligned
-- A kernel name (column $column) built for operands aligned to fewer than $aligned_bytes bytes: its
-- alignment in elements x the element size ($elem_bytes, the statement elem_bytes).
gemm_alignment($column) * $elem_bytes < $aligned_bytes

-- name: unaligned_totals
-- GEMM time, and the unaligned kernels' time, launches and names, over all ranks.
SELECT sum(total_ns) AS gemm_ns, sum(total_ns) FILTER (WHERE $unaligned) AS bad_ns,
       sum(instances) FILTER (WHERE $unaligned) AS launches,
       count(DISTINCT name) FILTER (WHERE $unaligned) AS names
FROM kernel_summary WHERE subcategory = 'gemm'

-- name: unaligned_per_rank
-- The unaligned GEMM time per rank.
SELECT rank, sum(total_ns) AS ns FROM kernel_summary
WHERE subcategory = 'gemm' AND $unaligned GROUP BY rank ORDER BY rank

-- name: main_precision
-- The precision that takes most of the unaligned time, and its element size.
SELECT gemm_precision(name) AS p, $elem_bytes AS b FROM kernel_summary
WHERE subcategory = 'gemm' AND $unaligned GROUP BY ALL ORDER BY sum(total_ns) DESC, p LIMIT 1

-- name: unaligned_kernels
-- The unaligned GEMM kernels with their alignment in elements and bytes and their share of all
-- GEMM time ($gemm_ns), all ranks.
SELECT name, gemm_precision(name) AS precision, gemm_alignment(name) AS align_elems,
       gemm_alignment(name) * $elem_bytes AS align_bytes, sum(instances) AS launches,
       sum(total_ns) AS total_ns,
       round(100.0 * sum(total_ns) / $gemm_ns, 1) AS pct_of_gemm_time,
       list(DISTINCT rank ORDER BY rank) AS ranks
FROM kernel_summary WHERE subcategory = 'gemm' AND $unaligned
GROUP BY 1, 2, 3, 4 ORDER BY total_ns DESC, name

-- name: unaligned_shapes
-- The ops that launched the unaligned GEMM kernels ($op_gemms: rules/_gemm_ops.py's op_gemms over
-- the statement unaligned on k.name), with their M, N, K.
SELECT op, dtype, batch, m, n, k, count(*) AS launches,
       sum(duration_ns) AS kernel_ns, arg_max(name, (duration_ns, name)) AS kernel
FROM (
    $op_gemms)
WHERE op IS NOT NULL GROUP BY ALL
ORDER BY kernel_ns DESC, op, dtype, batch, m, n, k
