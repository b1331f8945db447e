-- gaps: every idle interval piece of every window, with its cause and what the host was doing.
-- Why: the idle part of the partition, itemised: where the GPU waited and on what, so a user can
-- jump from a number to the moments behind it.
-- Columns: rank INTEGER, step BIGINT (NULL = the whole-capture window: filter on it, the step
--   rows repeat the same time), start_ns, end_ns, duration_ns BIGINT ns (the piece),
--   cause VARCHAR: launch_gap | input_stall | sync_stall | host_bound | idle_other,
--   host_activity VARCHAR: launch_gap: the launch call; input_stall: the input NVTX range;
--   sync_stall: the synchronising call; host_bound: the NVTX range on the launching thread at
--   the launch (NULL if none); idle_other: why no host cause applies. A gap has up to three
--   pieces: host stall, launch gap, and the wait after the launch call ended when the operation
--   started long after it (sync_stall or idle_other, docs/metrics.md "Idle causes"),
--   gap_start_ns, gap_end_ns BIGINT ns (the whole gap), correlation_id BIGINT (the operation
--   that ended the gap).
-- Definition: docs/metrics.md "Idle causes" (see _tp_gaps). Per window, the pieces' durations sum
--   to time_partition.idle_ns; zero-length pieces are left out.
-- columns: rank, step, start_ns, end_ns, duration_ns, cause, host_activity, gap_start_ns, gap_end_ns, correlation_id
-- stage: rank
-- result: stored
-- requires: _tp_gaps
CREATE OR REPLACE VIEW gaps AS
SELECT rank, step, g0 AS start_ns, g1 AS end_ns, g1 - g0 AS duration_ns, 'idle_other' AS cause,
       other_reason AS host_activity, g0 AS gap_start_ns, g1 AS gap_end_ns, correlation_id
FROM _tp_gaps
WHERE kind = 'idle_other'
UNION ALL
SELECT rank, step, g0, a_ns, a_ns - g0, host_cause, host_activity, g0, g1, correlation_id
FROM _tp_gaps
WHERE kind = 'host' AND a_ns > g0
UNION ALL
SELECT rank, step, a_ns, w_ns, w_ns - a_ns, 'launch_gap', launch_name, g0, g1, correlation_id
FROM _tp_gaps
WHERE kind = 'host' AND w_ns > a_ns
UNION ALL
SELECT rank, step, w_ns, g1, g1 - w_ns, wait_cause, wait_activity, g0, g1, correlation_id
FROM _tp_gaps
WHERE wait_cause IS NOT NULL AND g1 > w_ns;
