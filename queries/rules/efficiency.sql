-- The statements of the `compute-efficiency` finding (nsight_analyze/rules/efficiency.py).

-- name: partition_shares
-- The partition summed over ranks and steps: window (w), compute (c), memory (m), other (o),
-- exposed comms (n), idle (i), launch/host-bound (l) and input/sync stalls (h).
SELECT sum(window_ns) AS w, sum(compute_ns) AS c, sum(memory_ns) AS m, sum(other_ns) AS o,
       sum(comms_exposed_ns) AS n, sum(idle_ns) AS i,
       sum(launch_gap_ns + host_bound_ns) AS l, sum(input_stall_ns + sync_stall_ns) AS h
FROM diag_windows

-- name: partition_totals
-- Sum over ranks and steps of the partition (diag_windows).
SELECT sum(window_ns) AS window_ns, sum(compute_ns) AS compute_ns, sum(memory_ns)
       AS memory_ns,
       sum(other_ns) AS other_ns, sum(comms_exposed_ns) AS comms_exposed_ns,
       sum(idle_ns) AS idle_ns
FROM diag_windows
