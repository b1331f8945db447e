-- time_partition: where each rank's GPU time goes, per step and for the whole capture.
-- Why: the headline answer of the tool; every other number (overlap, MFU, diagnoses) refers back
-- to it. Exclusive parts sum exactly to the window, so nothing is double-counted or lost.
-- Columns (all BIGINT ns unless said): rank INTEGER, step BIGINT (NULL = whole capture),
--   window_ns = |W|;
--   compute_ns = |C|, memory_ns = |M \ C|, other_ns = |O \ (C∪M)|,
--   comms_exposed_ns = |N \ (C∪M∪O)|, idle_ns = |W| - |C∪M∪O∪N|
--     (window_ns = compute + memory + other + comms_exposed + idle, exactly);
--   idle split: launch_gap_ns, input_stall_ns, sync_stall_ns, host_bound_ns, idle_other_ns
--     (they sum to idle_ns; see gaps / _tp_gaps);
--   comms_total_ns = |N|, comms_hidden_ns = |N ∩ (C∪M∪O)|,
--   overlap_pct DOUBLE = 100 * comms_hidden / comms_total (NULL when comms_total = 0);
--   memory split: memory_kernels_ns = |K \ C| (memory-bound kernels: softmax, norms,
--   elementwise, ...), copies_ns = |P \ (C∪K)| (memcpy / memset operations no kernel of compute
--   or memory overlaps), with K, P the memory kernels and the copies (M = K ∪ P; they sum to
--   memory_ns); copies_total_ns = |P| (all copy time, hidden or not).
-- Definition: docs/metrics.md "Time partition". C, M, N, O = unions of the rank's compute,
--   memory, comms and other operations (gpu_ops) clipped to the window W; windows from `steps`
--   (step rows) and tp_capture (step NULL). Computed from one sweep (_tp_segments): a segment
--   counts for the highest-priority category running in it, compute > memory > other > comms.
--   window_ns is the summed length of the window's segments (they tile it exactly). Ranks without
--   GPU operations, and windows of zero length, have no rows. The parts and the overlap come from
--   tp_breakdown (which has them alone, without the idle split); the idle split from _tp_gaps.
-- columns: rank, step, window_ns, compute_ns, memory_ns, other_ns, comms_exposed_ns, idle_ns, launch_gap_ns, input_stall_ns, sync_stall_ns, host_bound_ns, idle_other_ns, comms_total_ns, comms_hidden_ns, overlap_pct, memory_kernels_ns, copies_ns, copies_total_ns
-- stage: rank
-- result: stored
-- requires: _tp_gaps, tp_breakdown
CREATE OR REPLACE VIEW time_partition AS
WITH idle AS (
    SELECT
        rank, step,
        sum(CASE WHEN kind = 'host' THEN w_ns - a_ns ELSE 0 END) AS launch_gap_ns,
        sum(CASE WHEN host_cause = 'input_stall' THEN a_ns - g0 ELSE 0 END) AS input_stall_ns,
        sum(CASE WHEN host_cause = 'sync_stall' THEN a_ns - g0 ELSE 0 END)
            + sum(CASE WHEN wait_cause = 'sync_stall' THEN g1 - w_ns ELSE 0 END) AS sync_stall_ns,
        sum(CASE WHEN host_cause = 'host_bound' THEN a_ns - g0 ELSE 0 END) AS host_bound_ns,
        sum(CASE WHEN kind = 'idle_other' THEN g1 - g0 ELSE 0 END)
            + sum(CASE WHEN wait_cause = 'idle_other' THEN g1 - w_ns ELSE 0 END) AS idle_other_ns
    FROM _tp_gaps
    GROUP BY rank, step
)
SELECT
    b.rank, b.step, b.window_ns, b.compute_ns, b.memory_ns, b.other_ns, b.comms_exposed_ns, b.idle_ns,
    coalesce(i.launch_gap_ns, 0)::BIGINT AS launch_gap_ns,
    coalesce(i.input_stall_ns, 0)::BIGINT AS input_stall_ns,
    coalesce(i.sync_stall_ns, 0)::BIGINT AS sync_stall_ns,
    coalesce(i.host_bound_ns, 0)::BIGINT AS host_bound_ns,
    coalesce(i.idle_other_ns, 0)::BIGINT AS idle_other_ns,
    b.comms_total_ns, b.comms_hidden_ns, b.overlap_pct,
    b.memory_kernels_ns, b.copies_ns, b.copies_total_ns
FROM tp_breakdown AS b
LEFT JOIN idle AS i ON i.rank = b.rank AND i.step IS NOT DISTINCT FROM b.step;
