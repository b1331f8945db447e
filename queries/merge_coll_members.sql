-- merge_coll_members: each NCCL kernel with its matched instance's cross-rank aggregates.
-- Why: collectives, collective_waits and alignment_quality all need, per participant,
-- the instance's last arrival and median end on the aligned timeline; computing them
-- once with window functions (partitioned by the instance key) keeps it one pass.
-- Columns:
--   rank, host, op, comm, seq, stream_id, correlation_id, duration_ns, bytes, key_source
--   arrive_ns         BIGINT  ns, aligned kernel start (the rank's arrival at the collective)
--   aligned_end_ns    BIGINT  ns, aligned kernel end
--   n_ranks           BIGINT  participants of the instance (ranks with this op/comm/seq)
--   n_hosts           BIGINT  distinct clock domains among them
--   last_arrive_ns    BIGINT  ns, latest arrival in the instance
--   median_end_ns     DOUBLE  ns, median aligned end in the instance
CREATE OR REPLACE VIEW merge_coll_members AS
WITH m AS (
    SELECT
        n.rank, c.host, n.op, n.comm, n.seq, n.stream_id, n.correlation_id, n.duration_ns, n.bytes,
        n.key_source,
        n.start_ns + c.clock_offset_ns AS arrive_ns,
        n.end_ns + c.clock_offset_ns AS aligned_end_ns
    FROM merge_nccl_kernels AS n
    JOIN merge_rank_clock AS c ON c.rank = n.rank
)
SELECT
    *,
    COUNT(*) OVER w AS n_ranks,
    COUNT(DISTINCT host) OVER w AS n_hosts,
    MAX(arrive_ns) OVER w AS last_arrive_ns,
    MEDIAN(aligned_end_ns) OVER w AS median_end_ns
FROM m
WINDOW w AS (PARTITION BY op, comm, seq);
