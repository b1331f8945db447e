-- time_partition: where each rank's GPU time goes, per step and for the whole capture.
-- Why: the headline answer of the tool; every other number (overlap, MFU, diagnoses) refers back
-- to it. Exclusive parts sum exactly to the window, so nothing is double-counted or lost.
-- Columns (all BIGINT ns unless said): rank INTEGER, step BIGINT (NULL = whole capture),
--   window_ns = |W|;
--   compute_ns = |C|, memory_ns = |M \ C|, other_ns = |O \ (C∪M)|,
--   comms_exposed_ns = |N \ (C∪M∪O)|, idle_ns = |W| - |C∪M∪O∪N|
--     (window_ns = compute + memory + other + comms_exposed + idle, exactly);
--   idle split: launch_gap_ns, input_stall_ns, sync_stall_ns, host_bound_ns, idle_other_ns
--     (they sum to idle_ns; see gaps / tp_gaps);
--   comms_total_ns = |N|, comms_hidden_ns = |N ∩ (C∪M∪O)|,
--   overlap_pct DOUBLE = 100 * comms_hidden / comms_total (NULL when comms_total = 0).
-- Definition: docs/metrics.md "Time partition". C, M, N, O = unions of the rank's compute,
--   memory, comms and other operations (gpu_ops) clipped to the window W; windows from `steps`
--   (step rows) and tp_capture (step NULL). Computed from one sweep (tp_segments): a segment
--   counts for the highest-priority category running in it, compute > memory > other > comms.
--   window_ns is the summed length of the window's segments (they tile it exactly). Ranks without
--   GPU operations, and windows of zero length, have no rows.
CREATE OR REPLACE VIEW time_partition AS
WITH parts AS (
    SELECT
        rank, step, GROUPING(step) AS whole,
        sum(end_ns - start_ns) AS window_ns,
        sum(CASE WHEN c > 0 THEN end_ns - start_ns ELSE 0 END) AS compute_ns,
        sum(CASE WHEN c = 0 AND m > 0 THEN end_ns - start_ns ELSE 0 END) AS memory_ns,
        sum(CASE WHEN c = 0 AND m = 0 AND o > 0 THEN end_ns - start_ns ELSE 0 END) AS other_ns,
        sum(CASE WHEN c = 0 AND m = 0 AND o = 0 AND n > 0 THEN end_ns - start_ns ELSE 0 END)
            AS comms_exposed_ns,
        sum(CASE WHEN c = 0 AND m = 0 AND o = 0 AND n = 0 THEN end_ns - start_ns ELSE 0 END) AS idle_ns,
        sum(CASE WHEN n > 0 THEN end_ns - start_ns ELSE 0 END) AS comms_total_ns,
        sum(CASE WHEN n > 0 AND c + m + o > 0 THEN end_ns - start_ns ELSE 0 END) AS comms_hidden_ns
    FROM tp_segments
    GROUP BY GROUPING SETS ((rank), (rank, step))
),
idle AS (
    SELECT
        rank, step,
        sum(CASE WHEN kind = 'host' THEN g1 - a_ns ELSE 0 END) AS launch_gap_ns,
        sum(CASE WHEN host_cause = 'input_stall' THEN a_ns - g0 ELSE 0 END) AS input_stall_ns,
        sum(CASE WHEN host_cause = 'sync_stall' THEN a_ns - g0 ELSE 0 END) AS sync_stall_ns,
        sum(CASE WHEN host_cause = 'host_bound' THEN a_ns - g0 ELSE 0 END) AS host_bound_ns,
        sum(CASE WHEN kind = 'idle_other' THEN g1 - g0 ELSE 0 END) AS idle_other_ns
    FROM tp_gaps
    GROUP BY rank, step
)
SELECT
    p.rank,
    CASE WHEN p.whole = 1 THEN NULL ELSE p.step END AS step,
    p.window_ns::BIGINT AS window_ns,
    p.compute_ns::BIGINT AS compute_ns,
    p.memory_ns::BIGINT AS memory_ns,
    p.other_ns::BIGINT AS other_ns,
    p.comms_exposed_ns::BIGINT AS comms_exposed_ns,
    p.idle_ns::BIGINT AS idle_ns,
    coalesce(i.launch_gap_ns, 0)::BIGINT AS launch_gap_ns,
    coalesce(i.input_stall_ns, 0)::BIGINT AS input_stall_ns,
    coalesce(i.sync_stall_ns, 0)::BIGINT AS sync_stall_ns,
    coalesce(i.host_bound_ns, 0)::BIGINT AS host_bound_ns,
    coalesce(i.idle_other_ns, 0)::BIGINT AS idle_other_ns,
    p.comms_total_ns::BIGINT AS comms_total_ns,
    p.comms_hidden_ns::BIGINT AS comms_hidden_ns,
    CASE WHEN p.comms_total_ns > 0 THEN 100.0 * p.comms_hidden_ns / p.comms_total_ns END AS overlap_pct
FROM parts AS p
LEFT JOIN idle AS i
    ON i.rank = p.rank AND i.step IS NOT DISTINCT FROM (CASE WHEN p.whole = 1 THEN NULL ELSE p.step END)
WHERE p.whole = 1 OR p.step IS NOT NULL;
