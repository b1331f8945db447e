-- The statements of the `launch-bound` / `host-bound` finding (nsight_analyze/rules/launch_bound.py).

-- name: launch_split
-- Per step, the worst rank's (by launch_gap_ns + host_bound_ns, as diag_step_causes) attributed
-- idle: the rows whose sum is the recoverable time, split into launch gaps and host-bound idle.
SELECT c.step, c.worst_rank AS rank, d.launch_gap_ns, d.host_bound_ns,
       c.max_ns AS launch_and_host_ns, c.step_ns,
       round(100.0 * d.launch_gap_ns / nullif(c.max_ns, 0), 2) AS launch_gap_pct
FROM diag_step_causes c JOIN diag_windows d
  ON d.rank = c.worst_rank AND d.step IS NOT DISTINCT FROM c.step
WHERE c.cause = 'launch' AND c.max_ns > 0

-- name: steady_split
-- The same split over the steady-state windows ($steady_windows: rules/_idle.py's
-- STEADY_WINDOWS) when a window holds graph capture.
SELECT step, rank, launch_gap_ns, host_bound_ns,
       launch_gap_ns + host_bound_ns AS launch_and_host_ns, step_ns,
       round(100.0 * launch_gap_ns / nullif(launch_gap_ns + host_bound_ns, 0), 2) AS launch_gap_pct
FROM (SELECT *, max(window_ns) OVER (PARTITION BY step) AS step_ns FROM ($steady_windows))
WHERE launch_gap_ns + host_bound_ns > 0
QUALIFY row_number() OVER (PARTITION BY step ORDER BY launch_gap_ns + host_bound_ns DESC, rank) = 1

-- name: split_totals
-- The launch gaps and host-bound idle of a split ($split), summed over its steps.
SELECT coalesce(sum(launch_gap_ns), 0) AS lg, coalesce(sum(host_bound_ns), 0) AS hb FROM ($split)

-- name: split_evidence
$split ORDER BY launch_and_host_ns DESC, step

-- name: capture_idle
SELECT rank, step, idle_ns, phase_ns FROM capture_idle ORDER BY rank, step

-- name: kernels_per_step
-- GPU operations per rank and step; $short_ns: what a short operation is; $step_list: the
-- launch-bound steps (NULL when none).
SELECT rank, step, count(*) AS ops, median(end_ns - start_ns) AS median_ns,
       count(*) FILTER (WHERE end_ns - start_ns < $short_ns) AS short_ops,
       step IN ($step_list) AS launch_bound
FROM tp_step_ops GROUP BY rank, step ORDER BY launch_bound DESC, step, rank

-- name: ops_launch_bound_vs_other
-- The mean operations and short operations per step, launch-bound steps (lb) against the others.
SELECT step IN ($step_list) AS lb, avg(ops) AS ops, avg(short) AS short
FROM (SELECT rank, step, count(*) AS ops,
             count(*) FILTER (WHERE end_ns - start_ns < $short_ns) AS short
      FROM tp_step_ops GROUP BY rank, step) GROUP BY 1

-- name: launch_gaps_longest
-- How concentrated the launch gaps are; $in_steps: the windows read (in steps or, without
-- steps, the capture).
SELECT count(*) AS n, coalesce(max(duration_ns), 0) AS longest,
       coalesce(sum(duration_ns), 0) AS total
FROM gaps WHERE $in_steps AND cause = 'launch_gap'

-- name: launch_call_median
SELECT median(a.end_ns - a.start_ns) FROM cuda_api a JOIN gpu_ops g
  ON g.rank = a.rank AND g.correlation_id = a.correlation_id

-- name: graph_kernel_pct
SELECT 100.0 * sum(graph_kernel_ns) / nullif(sum(kernel_ns), 0) FROM diag_rank_kernels
