-- The statements of the `cuda-graph-candidates` finding (nsight_analyze/rules/cuda_graph_candidates.py).

-- name: candidate_regions
-- The candidate regions: islands of >= $min_kernels consecutive kernels outside graphs;
-- $steady: nothing, or outside_one_time_phases.
SELECT * FROM graph_candidates WHERE kernels >= $min_kernels $steady

-- name: outside_one_time_phases
-- The condition that leaves out the regions a one-time phase overlaps (capture and compilation
-- are one-time work, not steady state).
AND NOT EXISTS (SELECT 1 FROM capture_phases AS p
WHERE p.rank = graph_candidates.rank AND p.start_ns < graph_candidates.end_ns AND p.end_ns > graph_candidates.start_ns)

-- name: region_idle
-- The idle before the kernels of each region ($regions: one of the two above), as rank, step, v.
SELECT rank, step, idle_ns AS v FROM ($regions)

-- name: graph_coverage_totals
SELECT sum(kernels) AS kernels, sum(graph_kernels) AS graph_kernels, sum(kernel_ns) AS kernel_ns,
       sum(graph_kernel_ns) AS graph_kernel_ns FROM graph_coverage

-- name: graph_launches
SELECT coalesce(sum(calls), 0) FROM api_summary WHERE is_graph_launch(name)

-- name: region_stats
SELECT count(*) AS regions, sum(kernels) AS kernels, sum(short_kernels) AS short_kernels,
       sum(busy_ns) AS busy_ns, sum(idle_ns) AS idle_ns, max(streams) AS streams
FROM ($regions)

-- name: regions_evidence
-- The candidate regions, most idle first (candidate_regions, written out as the evidence shows it).
SELECT rank, step, start_ns, end_ns - start_ns AS span_ns, kernels, streams, busy_ns, idle_ns,
       launch_gap_ns, host_bound_ns, short_kernels, first_name
FROM graph_candidates WHERE kernels >= $min_kernels $steady ORDER BY idle_ns DESC, rank, start_ns

-- name: graph_coverage_per_rank
SELECT rank, sum(kernels) AS kernels, sum(graph_kernels) AS graph_kernels,
       round(100.0 * sum(graph_kernels) / nullif(sum(kernels), 0), 2) AS graph_launch_pct,
       round(100.0 * sum(graph_kernel_ns) / nullif(sum(kernel_ns), 0), 2) AS graph_time_pct
FROM graph_coverage GROUP BY rank ORDER BY rank
