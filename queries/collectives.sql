-- collectives: one row per NCCL operation instance, matched across the ranks that ran it.
-- Why: a collective finishes only when its last participant arrives, so the spread of
-- arrivals (skew) is time the early ranks wait; matching is by key, not by clock
-- (see merge_nccl_kernels), so it works before and after clock alignment.
-- Columns:
--   coll_id        BIGINT   1-based, ordered by (op, comm, seq)
--   op             VARCHAR  NCCL operation (AllReduce, AllGather, ReduceScatter, SendRecv, ...)
--   comm           VARCHAR  communicator id (NVTX payload) or 'stream<i>' (stream ordinal)
--   seq            BIGINT   sequence within (op, comm)
--   ranks          BIGINT   participants found; 1 = unmatched (no partner on other ranks)
--   expected_ranks BIGINT   max participants of any instance with this (op, comm)
--   hosts          BIGINT   distinct clock domains among the participants
--   bytes          BIGINT   message size (NVTX payload), NULL when unknown
--   start_ns       BIGINT   ns aligned, first arrival
--   end_ns         BIGINT   ns aligned, last end
--   start_skew_ns  BIGINT   ns, last arrival - first arrival (aligned kernel starts)
--   end_skew_ns    BIGINT   ns, last end - first end (near 0 when clocks are aligned)
--   transfer_ns    BIGINT   ns, shortest participant's kernel duration (it waited least)
--   busbw_gbps     DOUBLE   GB/s (1e9 B/s) = bytes * factor / transfer_ns; nccl-tests factors:
--                           AllReduce 2(n-1)/n; AllGather, ReduceScatter (n-1)/n applied to the
--                           total buffer bytes * n (NCCL's payload size is per rank);
--                           Broadcast, Reduce, SendRecv, Send, Recv 1. NULL without bytes.
--   last_rank      INTEGER  rank that arrived last (the instance's straggler)
--   last_margin_ns BIGINT   ns, last arrival - second-latest arrival: how much sooner the
--                           instance could start without its last rank (NULL when unmatched)
--   key_source     VARCHAR  nvtx-payload | stream-ordinal
CREATE OR REPLACE VIEW collectives AS
WITH g AS (
    SELECT
        op, comm, seq,
        COUNT(*) AS ranks,
        COUNT(DISTINCT host) AS hosts,
        MAX(bytes) AS bytes,
        MIN(arrive_ns) AS start_ns,
        MAX(aligned_end_ns) AS end_ns,
        MAX(arrive_ns) - MIN(arrive_ns) AS start_skew_ns,
        MAX(aligned_end_ns) - MIN(aligned_end_ns) AS end_skew_ns,
        MIN(duration_ns) AS transfer_ns,
        ARG_MAX(rank, arrive_ns) AS last_rank,
        MAX(arrive_ns) - (MAX(arrive_ns, 2))[2] AS last_margin_ns,
        MIN(key_source) AS key_source
    FROM merge_coll_members
    GROUP BY op, comm, seq
)
SELECT
    ROW_NUMBER() OVER (ORDER BY op, comm, seq) AS coll_id,
    op, comm, seq, ranks,
    MAX(ranks) OVER (PARTITION BY op, comm) AS expected_ranks,
    hosts, bytes, start_ns, end_ns, start_skew_ns, end_skew_ns, transfer_ns,
    CASE
        WHEN bytes IS NULL OR transfer_ns <= 0 THEN NULL
        WHEN op = 'AllReduce' THEN bytes * 2.0 * (ranks - 1) / ranks / transfer_ns
        WHEN op IN ('AllGather', 'AllGatherV', 'ReduceScatter') THEN bytes * ranks * (ranks - 1.0) / ranks / transfer_ns
        WHEN op = 'AllToAll' THEN bytes * (ranks - 1.0) / ranks / transfer_ns
        ELSE bytes * 1.0 / transfer_ns
    END AS busbw_gbps,
    last_rank,
    last_margin_ns,
    key_source
FROM g;
