-- rank_rollup: one row per rank: where it sits in time, how much it computes, who waits for whom.
-- Why: the `ranks` command and the report need, per rank, the alignment it got, its compute
-- time, the collective wait it suffered and caused, and whether it is the straggler.
-- Columns: rank, job, host, device_id, gpu_name, clock_offset_ns (ns), alignment_method,
--   residual_p50_ns, residual_p95_ns (ns), compute_ns (ns, whole capture), collectives,
--   unmatched, incomplete, peer_unknown, wait_suffered_ns, wait_caused_ns (ns), times_last, cost_ns
--   (GPU-ns), times_slowest, verdict, straggler; definitions in merge_rank_rollup_of.sql.
--   time_partition is evaluated once.
-- columns: rank, job, host, device_id, gpu_name, clock_offset_ns, alignment_method, residual_p50_ns, residual_p95_ns, compute_ns, collectives, unmatched, incomplete, peer_unknown, wait_suffered_ns, wait_caused_ns, times_last, cost_ns, times_slowest, verdict, straggler
-- stage: job
-- result: stored
-- requires: merge_imbalance_of, merge_rank_rollup_of, time_partition
CREATE OR REPLACE VIEW rank_rollup AS
WITH rr_tp AS MATERIALIZED (
    SELECT rank, step, compute_ns FROM time_partition
),
rr_imb AS MATERIALIZED (
    SELECT * FROM merge_imbalance_of('rr_tp')
)
SELECT * FROM merge_rank_rollup_of('rr_tp', 'rr_imb');
