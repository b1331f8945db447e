-- merge_coll_members: each NCCL kernel (or copy-engine collective: merge_nccl_kernels) with its
-- matched instance's cross-rank aggregates.
-- Why: collective_waits, alignment_quality, clock alignment and the roll-up all need, per
-- participant, the instance's id, last arrival and median end on the aligned timeline;
-- one GROUP BY joined back (cheaper than window aggregates) serves them all. Only `complete`
-- instances (every participant present) may be used for waits, skew and clock alignment.
-- Columns: those of _merge_coll_arrivals (rank, job, host, op, comm, seq, stream_id, correlation_id,
--   duration_ns, bytes, key_source, peer_rank, comm_size, job_complete, arrive_ns, aligned_end_ns) and
--   of merge_coll_group_of (n_ranks, n_hosts, first/last/second_arrive_ns, last_rank,
--   first/last/median_end_ns, min_duration_ns, max_bytes, complete, coll_id, expected_ranks).
-- columns: rank, job, host, op, comm, seq, stream_id, correlation_id, duration_ns, bytes, key_source, peer_rank, comm_size, job_complete, arrive_ns, aligned_end_ns, n_ranks, n_hosts, first_arrive_ns, last_arrive_ns, second_arrive_ns, last_rank, first_end_ns, last_end_ns, median_end_ns, min_duration_ns, max_bytes, complete, coll_id, expected_ranks
-- stage: job
-- result: stored
-- requires: _merge_coll_arrivals, merge_coll_group_of
CREATE OR REPLACE VIEW merge_coll_members AS
WITH cm_a AS MATERIALIZED (
    SELECT * FROM _merge_coll_arrivals
)
SELECT a.*, g.* EXCLUDE (job, op, comm, seq, key_source, comm_size)
FROM cm_a AS a
JOIN merge_coll_group_of('cm_a') AS g
    ON g.job = a.job AND g.op = a.op AND g.comm = a.comm AND g.seq = a.seq;
