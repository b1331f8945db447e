-- The statements the idle-time rules share (nsight_analyze/rules/_idle.py).

-- name: cause_per_step
-- One idle cause's rows of diag_step_causes ($cause: input_stall, sync_stall or launch).
SELECT * FROM diag_step_causes WHERE cause = '$cause'

-- name: steady_launch_per_step
-- Graph capture and compilation are one-time work (capture_idle): the steady state does not lose
-- their idle. Per step, the worst launch_gap + host_bound idle of the steady-state windows
-- ($steady_windows: STEADY_WINDOWS).
SELECT step, max(launch_gap_ns + host_bound_ns) AS max_ns,
       100.0 * max(launch_gap_ns + host_bound_ns) / nullif(max(window_ns), 0)
           AS share_pct
FROM ($steady_windows) GROUP BY step

-- name: cause_total
-- The worst rank's time in the cause ($causes: one of the two above), summed over steps.
SELECT coalesce(sum(max_ns), 0) FROM ($causes)

-- name: cause_steps
-- The steps whose worst rank spends >= $min_pct of the step in the cause.
SELECT step FROM ($causes) WHERE max_ns > 0 AND share_pct >= $min_pct ORDER BY step

-- name: cause_ranks
-- The ranks with a window >= $min_pct in the cause ($column: input_stall_ns or sync_stall_ns;
-- $windows: all_windows or the steady-state windows).
SELECT DISTINCT rank FROM ($windows) WHERE $column > 0
AND 100.0 * ($column) / nullif(window_ns, 0) >= $min_pct ORDER BY rank

-- name: launch_ranks
-- The same for the launch cause: launch gaps and host-bound idle together.
SELECT DISTINCT rank FROM ($windows) WHERE launch_gap_ns + host_bound_ns > 0
AND 100.0 * (launch_gap_ns + host_bound_ns) / nullif(window_ns, 0) >= $min_pct ORDER BY rank

-- name: all_windows
-- The windows whose idle the causes split (diag_windows), as a subquery.
SELECT * FROM diag_windows

-- name: capture_idle_windows
-- The windows holding idle inside a one-time phase.
SELECT count(*) FROM capture_idle WHERE idle_ns > 0

-- name: steady_windows
-- diag_windows without the idle of one-time phases (capture_idle: graph capture, torch.compile
-- compilation): each cause loses its own part of the idle inside the phases.
SELECT d.* REPLACE (
       greatest(d.host_bound_ns - coalesce(c.idle_ns - c.launch_gap_idle_ns, 0), 0) AS host_bound_ns,
       greatest(d.launch_gap_ns - coalesce(c.launch_gap_idle_ns, 0), 0) AS launch_gap_ns)
FROM diag_windows AS d
LEFT JOIN capture_idle AS c ON c.rank = d.rank AND c.step IS NOT DISTINCT FROM d.step

-- name: per_step_evidence
-- Per step: the worst rank's time in the cause ($cause: input_stall, sync_stall or launch, which
-- names the column), the step length and the ranks affected.
SELECT step, worst_rank, max_ns AS ${cause}_ns, step_ns, round(share_pct, 2) AS share_pct, ranks
FROM diag_step_causes WHERE cause = '$cause' AND max_ns > 0 ORDER BY max_ns DESC, step

-- name: gap_evidence
-- The idle pieces (gaps) of the causes ($causes: an IN-list of gaps.cause), longest first, with
-- what the host was doing; $in_steps: the windows read (in steps or, without steps, the capture).
SELECT rank, step, start_ns, duration_ns, cause, host_activity FROM gaps
WHERE $in_steps AND cause IN ($causes) ORDER BY duration_ns DESC, rank, start_ns
