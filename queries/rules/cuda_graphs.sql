-- The statements of the `cuda-graphs` capture finding (nsight_analyze/rules/cuda_graphs.py).

-- name: graph_share_per_rank
-- Per rank, the kernels, those replayed from graphs and the graph share of kernel time.
SELECT rank, kernels, graph_kernels, 100.0 * graph_kernel_ns / nullif(kernel_ns, 0) AS graph_pct
FROM diag_rank_kernels ORDER BY rank

-- name: graph_launches
SELECT coalesce(sum(calls), 0) FROM api_summary WHERE is_graph_launch(name)

-- name: graph_coverage_per_rank
SELECT rank, kernels, graph_kernels, graphs,
       round(100.0 * graph_kernel_ns / nullif(kernel_ns, 0), 2) AS graph_time_pct
FROM diag_rank_kernels ORDER BY rank

-- name: graph_steps
-- The steps whose windows hold a kernel replayed from a graph.
SELECT DISTINCT w.step FROM graph_coverage g JOIN diag_window_bounds w
  ON w.rank = g.rank AND w.step IS NOT DISTINCT FROM g.step
WHERE g.graph_kernels > 0 ORDER BY 1

-- name: hip_graph_ranks
-- The ranks that launched HIP graphs.
SELECT DISTINCT rank FROM api_summary WHERE is_graph_launch(name) AND name LIKE 'hip%'

-- name: node_traced_ranks
-- The ranks whose kernels carry an nsys graph node id (traced per graph node).
SELECT DISTINCT rank FROM kernels WHERE graph_node_id IS NOT NULL

-- name: no_ranks
-- No rank: the place of hip_graph_ranks / node_traced_ranks when their table is missing.
SELECT NULL::INTEGER AS rank WHERE FALSE

-- name: trace_kinds
-- What recorded each of the ranks $ranks (a list of rank numbers): nsys per graph ('nsys') or per
-- node ('nsys-node'), the PyTorch profiler on CUDA ('kineto') or on ROCm ('kineto-rocm');
-- $vendor: gpus.VENDOR_SQL, $node: node_traced_ranks, $hip: hip_graph_ranks (or no_ranks).
SELECT DISTINCT CASE
           WHEN f.source_format IN ('nsys-sqlite', 'nsys-recipe')
               THEN CASE WHEN r.rank IN ($node) THEN 'nsys-node' ELSE 'nsys' END
           WHEN f.source_format = 'kineto-json'
               THEN CASE WHEN ($vendor) = 'amd' OR r.rank IN ($hip) THEN 'kineto-rocm'
                         ELSE 'kineto' END
           END AS kind
FROM ranks r JOIN files f ON f.file_id = r.file_id
WHERE r.rank IN ($ranks)
ORDER BY kind
