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
--   expected_ranks BIGINT   max participants of any instance with this (op, comm); fewer =
--                           a partial match (ranks with different collective counts)
--   hosts          BIGINT   distinct clock domains among the participants
--   bytes          BIGINT   message size (NVTX payload), NULL when unknown
--   start_ns       BIGINT   ns aligned, first arrival
--   end_ns         BIGINT   ns aligned, last end
--   start_skew_ns  BIGINT   ns, last arrival - first arrival (aligned kernel starts)
--   end_skew_ns    BIGINT   ns, last end - first end (near 0 when clocks are aligned)
--   transfer_ns    BIGINT   ns, shortest participant's kernel duration (it waited least)
--   busbw_gbps     DOUBLE   GB/s (1e9 B/s) = bytes * factor / transfer_ns; nccl-tests factors:
--                           AllReduce 2(n-1)/n; AllGather, ReduceScatter (n-1)/n applied to the
--                           total buffer bytes * n (NCCL's payload size is per rank); AllToAll
--                           (n-1)/n; Broadcast, Reduce, SendRecv, Send, Recv 1. NULL without bytes.
--   last_rank      INTEGER  rank that arrived last (the instance's straggler)
--   last_margin_ns BIGINT   ns, last arrival - second-latest arrival: how much sooner the
--                           instance could start without its last rank (NULL when unmatched)
--   key_source     VARCHAR  nvtx-payload | stream-ordinal
-- columns: coll_id, op, comm, seq, ranks, expected_ranks, hosts, bytes, start_ns, end_ns, start_skew_ns, end_skew_ns, transfer_ns, busbw_gbps, last_rank, last_margin_ns, key_source
-- stage: job
-- result: stored
-- requires: _merge_coll_arrivals, merge_coll_group_of, ranks
CREATE OR REPLACE VIEW collectives AS
SELECT
    coll_id, op, comm, seq,
    n_ranks AS ranks,
    expected_ranks,
    n_hosts AS hosts,
    max_bytes AS bytes,
    first_arrive_ns AS start_ns,
    last_end_ns AS end_ns,
    last_arrive_ns - first_arrive_ns AS start_skew_ns,
    last_end_ns - first_end_ns AS end_skew_ns,
    min_duration_ns AS transfer_ns,
    CASE
        WHEN max_bytes IS NULL OR min_duration_ns <= 0 THEN NULL
        WHEN op = 'AllReduce' THEN max_bytes * 2.0 * (n_ranks - 1) / n_ranks / min_duration_ns
        WHEN op IN ('AllGather', 'AllGatherV', 'ReduceScatter')
            THEN max_bytes * n_ranks * (n_ranks - 1.0) / n_ranks / min_duration_ns
        WHEN op = 'AllToAll' THEN max_bytes * (n_ranks - 1.0) / n_ranks / min_duration_ns
        ELSE max_bytes * 1.0 / min_duration_ns
    END AS busbw_gbps,
    last_rank,
    last_arrive_ns - second_arrive_ns AS last_margin_ns,
    key_source
FROM merge_coll_group_of('_merge_coll_arrivals');
