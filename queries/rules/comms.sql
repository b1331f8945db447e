-- The statements of the `exposed-comm` and `load-imbalance` findings (nsight_analyze/rules/comms.py).

-- name: recoverable_per_step
-- Per step: the critical rank's overlap-recoverable exposed comms (min over ranks), the same without
-- the exposed time whose wait was not measured, the largest exposed comms and the step length.
SELECT step, min(recoverable_ns) AS rec, arg_min(rank, recoverable_ns) AS critical_rank,
       min(greatest(recoverable_ns - unknown_wait_ns, 0)) AS rec_min,
       max(comms_exposed_ns) AS exposed, max(window_ns) AS step_ns
FROM diag_comm_recoverable GROUP BY step

-- name: exposed_ranks
-- The ranks whose overlap-recoverable part reaches $th % of their window.
SELECT DISTINCT rank FROM diag_comm_recoverable
WHERE 100.0 * recoverable_ns / nullif(window_ns, 0) >= $th ORDER BY rank

-- name: exposed_per_step
SELECT step, min(recoverable_ns) AS recoverable_ns, arg_min(rank, recoverable_ns) AS
       critical_rank,
       max(comms_exposed_ns) AS max_exposed_ns,
       CASE WHEN bool_and(unknown_wait_ns = 0 AND last_transfer_known)
            THEN max(exposed_wait_ns) END AS max_exposed_wait_ns,
       CASE WHEN bool_and(last_transfer_known) THEN max(last_transfer_ns) END
           AS max_last_transfer_ns,
       max(unknown_wait_ns) AS max_unknown_wait_ns, max(window_ns) AS step_ns,
       round(avg(overlap_pct), 1) AS mean_overlap_pct
FROM diag_comm_recoverable GROUP BY step ORDER BY step

-- name: per_collective_and_bucket
SELECT op, bucket, string_agg(DISTINCT dimension, ',' ORDER BY dimension) AS dimension,
       count(*) AS instances, CAST(avg(duration_ns) AS BIGINT) AS avg_duration_ns,
       CAST(avg(exposed_ns) AS BIGINT) AS avg_exposed_ns,
       CASE WHEN bool_and(wait_known) THEN CAST(avg(exposed_wait_ns) AS BIGINT) END
           AS avg_exposed_wait_ns,
       round(100.0 * (1 - sum(exposed_ns) / nullif(sum(duration_ns), 0)), 1) AS hidden_pct,
       bool_or(is_last) AS last_in_step
FROM diag_comm_exposure GROUP BY op, bucket ORDER BY bucket, op

-- name: mean_overlap
SELECT avg(overlap_pct) FROM diag_windows WHERE comms_total_ns > 0

-- name: exposed_sums
-- The exposed time, its wait for the last rank, the last reduction's transfer and the exposed time
-- whose wait (or, in the last reduction, wait and transfer) was not measured, over steps and ranks.
SELECT coalesce(sum(exposed_wait_ns), 0) AS wait, coalesce(sum(comms_exposed_ns), 0) AS exposed,
       coalesce(sum(last_transfer_ns), 0) AS last, coalesce(sum(unknown_wait_ns), 0) AS unknown,
       coalesce(sum(last_transfer_ns) FILTER (WHERE NOT last_transfer_known), 0) AS last_unknown
FROM diag_comm_recoverable

-- name: median_busbw
SELECT op, median(busbw_gbps) AS busbw FROM collectives WHERE busbw_gbps IS NOT NULL
GROUP BY op ORDER BY op

-- name: imbalance_per_step
-- Per step ($where: step IS NOT NULL, or step IS NULL without steps) of two ranks or more: the
-- slowest rank's compute over the mean of the others.
SELECT step, ranks, max_compute_ns, mean_compute_ns, ratio, slowest_rank, balanced,
       max_compute_ns - (ranks * mean_compute_ns - max_compute_ns) / (ranks - 1) AS excess_ns
FROM imbalance WHERE $where AND ranks >= 2

-- name: straggler_verdict
SELECT * FROM merge_straggler_verdict

-- name: imbalance_evidence
-- The imbalance rows ($where as imbalance_per_step).
SELECT step, ranks, slowest_rank, max_compute_ns, CAST(mean_compute_ns AS BIGINT) AS
       mean_compute_ns, round(ratio, 4) AS ratio, wait_gpu_ns, balanced
FROM imbalance WHERE $where ORDER BY step

-- name: per_rank
SELECT rank, host, compute_ns, collectives, wait_suffered_ns, wait_caused_ns, times_last,
       times_slowest, straggler FROM rank_rollup ORDER BY rank

-- name: wait_caused
SELECT rank, wait_caused_ns FROM rank_rollup

-- name: compute_slow_vs_others
-- The mean compute per window of the slow ranks ($ranks: an IN-list) against the others'.
SELECT rank IN ($ranks) AS slow, avg(compute_ns) AS c
FROM diag_windows GROUP BY 1

-- name: max_residual_p95
SELECT max(residual_p95_ns) FROM alignment_quality
