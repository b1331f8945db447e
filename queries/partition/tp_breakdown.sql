-- tp_breakdown: where each rank's GPU time goes, per step and for the whole capture, without the
-- causes of the idle time (time_partition adds them).
-- Why: the breakdown and the compute/communication overlap alone need one sweep of the GPU
-- operations; the idle causes need every gap joined to its launch call and the host's ranges,
-- which costs more than the sweep. Peer tools' breakdowns (HTA's temporal breakdown and
-- comm/comp overlap) compute this much; the summary and the report read time_partition.
-- Columns (all BIGINT ns unless said): rank INTEGER, step BIGINT (NULL = whole capture),
--   window_ns, compute_ns, memory_ns, other_ns, comms_exposed_ns, idle_ns, comms_total_ns,
--   comms_hidden_ns, overlap_pct DOUBLE, memory_kernels_ns, copies_ns, copies_total_ns; the same
--   values as time_partition's columns of the same names (definitions there and in
--   docs/metrics.md "Time partition").
-- Definition: one GROUP BY of _tp_segments: a segment counts for the highest-priority category
--   running in it, compute > memory > other > comms; ranks without GPU operations, and windows of
--   zero length, have no rows.
-- columns: rank, step, window_ns, compute_ns, memory_ns, other_ns, comms_exposed_ns, idle_ns, comms_total_ns, comms_hidden_ns, overlap_pct, memory_kernels_ns, copies_ns, copies_total_ns
-- stage: rank
-- result: stored
-- requires: _tp_segments, _comms_exposed
CREATE OR REPLACE VIEW tp_breakdown AS
WITH parts AS (
    SELECT
        rank, step, GROUPING(step) AS whole,
        sum(end_ns - start_ns) AS window_ns,
        sum(CASE WHEN c > 0 THEN end_ns - start_ns ELSE 0 END) AS compute_ns,
        sum(CASE WHEN c = 0 AND m > 0 THEN end_ns - start_ns ELSE 0 END) AS memory_ns,
        sum(CASE WHEN c = 0 AND m = 0 AND o > 0 THEN end_ns - start_ns ELSE 0 END) AS other_ns,
        sum(CASE WHEN _comms_exposed(c, m, o, n) THEN end_ns - start_ns ELSE 0 END) AS comms_exposed_ns,
        sum(CASE WHEN c = 0 AND m = 0 AND o = 0 AND n = 0 THEN end_ns - start_ns ELSE 0 END) AS idle_ns,
        sum(CASE WHEN n > 0 THEN end_ns - start_ns ELSE 0 END) AS comms_total_ns,
        sum(CASE WHEN n > 0 AND c + m + o > 0 THEN end_ns - start_ns ELSE 0 END) AS comms_hidden_ns,
        sum(CASE WHEN c = 0 AND m > k THEN end_ns - start_ns ELSE 0 END) AS memory_kernels_ns,
        sum(CASE WHEN c = 0 AND m > 0 AND m = k THEN end_ns - start_ns ELSE 0 END) AS copies_ns,
        sum(CASE WHEN k > 0 THEN end_ns - start_ns ELSE 0 END) AS copies_total_ns
    FROM _tp_segments
    GROUP BY GROUPING SETS ((rank), (rank, step))
)
SELECT
    rank,
    CASE WHEN whole = 1 THEN NULL ELSE step END AS step,
    window_ns::BIGINT AS window_ns,
    compute_ns::BIGINT AS compute_ns,
    memory_ns::BIGINT AS memory_ns,
    other_ns::BIGINT AS other_ns,
    comms_exposed_ns::BIGINT AS comms_exposed_ns,
    idle_ns::BIGINT AS idle_ns,
    comms_total_ns::BIGINT AS comms_total_ns,
    comms_hidden_ns::BIGINT AS comms_hidden_ns,
    CASE WHEN comms_total_ns > 0 THEN 100.0 * comms_hidden_ns / comms_total_ns END AS overlap_pct,
    memory_kernels_ns::BIGINT AS memory_kernels_ns,
    copies_ns::BIGINT AS copies_ns,
    copies_total_ns::BIGINT AS copies_total_ns
FROM parts
WHERE whole = 1 OR step IS NOT NULL;
