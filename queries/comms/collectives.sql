-- collectives: one row per NCCL operation instance, matched across the ranks that ran it.
-- Why: a collective finishes only when its last participant arrives, so the spread of
-- arrivals (skew) is time the early ranks wait; matching is by key, not by clock
-- (see merge_nccl_kernels), so it works before and after clock alignment. An operation is an NCCL
-- kernel or a copy-engine collective (NCCL >= 2.28 `ce-coll`: its copies on one rank are one
-- operation, merge_nccl_kernels.engine = 'copy-engine'; NOT CONFIRMED by a real capture, see
-- _nccl_ce_ops), matched alike.
-- Columns:
--   coll_id        BIGINT   1-based, ordered by (job, op, comm, seq)
--   job            INTEGER  the job (see `jobs`); instances never span jobs
--   op             VARCHAR  NCCL operation (AllReduce, AllGather, ReduceScatter, SendRecv, ...);
--                           SendRecv for every point-to-point kernel (Send and Recv too)
--   comm           VARCHAR  communicator id (NVTX payload), 'pg:<name>[<ranks>]' (PyTorch process
--                           group, Kineto), 'stream<i>' (stream ordinal), or for
--                           point-to-point 'p2p:<rank>-<rank>' (the pair) / 'p2p:<rank>-?' (peer unknown)
--   seq            BIGINT   sequence within (job, op, comm)
--   ranks          BIGINT   participants found; 1 = unmatched (no partner on other ranks)
--   expected_ranks BIGINT   participants it must have when known (communicator size; 2 for
--                           point-to-point), else max participants of any instance with this
--                           (job, op, comm); fewer = a partial match
--   hosts          BIGINT   distinct clock domains among the participants
--   bytes          BIGINT   message size (NVTX payload), NULL when unknown
--   start_ns       BIGINT   ns aligned, first arrival
--   end_ns         BIGINT   ns aligned, last end
--   start_skew_ns  BIGINT   ns, last arrival - first arrival (aligned kernel / first copy starts); NULL unless complete
--   end_skew_ns    BIGINT   ns, last end - first end (near 0 when clocks are aligned); NULL unless complete
--   transfer_ns    BIGINT   ns, shortest participant's kernel duration (it waited least; a copy-engine
--                           participant's: the span of its copies)
--   busbw_gbps     DOUBLE   GB/s (1e9 B/s) = bytes * factor / transfer_ns; nccl-tests factors:
--                           AllReduce 2(n-1)/n; AllGather, ReduceScatter (n-1)/n applied to the
--                           total buffer bytes * n (NCCL's payload size is per rank); AllToAll
--                           (n-1)/n; Broadcast, Reduce, SendRecv, Send, Recv 1; n = communicator size
--                           when known, else the participants found. NULL without bytes.
--   last_rank      INTEGER  rank that arrived last (the instance's straggler); NULL unless complete
--   last_margin_ns BIGINT   ns, last arrival - second-latest arrival: how much sooner the
--                           instance could start without its last rank (NULL unless complete)
--   key_source     VARCHAR  nccl-api-id | nvtx-payload | kineto-seq | kineto-pg-order | stream-ordinal |
--                           peer | peer-unknown
--   complete       BOOLEAN  every participant is present (merge_coll_group_of): only then are
--                           skew, last rank and the waits (collective_waits) reported
-- columns: coll_id, job, op, comm, seq, ranks, expected_ranks, hosts, bytes, start_ns, end_ns, start_skew_ns, end_skew_ns, transfer_ns, busbw_gbps, last_rank, last_margin_ns, key_source, complete
-- stage: job
-- result: stored
-- requires: _merge_coll_arrivals, merge_coll_group_of, ranks
CREATE OR REPLACE VIEW collectives AS
SELECT
    coll_id, job::INTEGER AS job, op, comm, seq,
    n_ranks AS ranks,
    expected_ranks,
    n_hosts AS hosts,
    max_bytes AS bytes,
    first_arrive_ns AS start_ns,
    last_end_ns AS end_ns,
    CASE WHEN complete THEN last_arrive_ns - first_arrive_ns END AS start_skew_ns,
    CASE WHEN complete THEN last_end_ns - first_end_ns END AS end_skew_ns,
    min_duration_ns AS transfer_ns,
    CASE
        WHEN max_bytes IS NULL OR min_duration_ns <= 0 THEN NULL
        WHEN op = 'AllReduce' THEN max_bytes * 2.0 * (n - 1) / n / min_duration_ns
        WHEN op IN ('AllGather', 'AllGatherV', 'ReduceScatter')
            THEN max_bytes * n * (n - 1.0) / n / min_duration_ns
        WHEN op = 'AllToAll' THEN max_bytes * (n - 1.0) / n / min_duration_ns
        ELSE max_bytes * 1.0 / min_duration_ns
    END AS busbw_gbps,
    CASE WHEN complete THEN last_rank END AS last_rank,
    CASE WHEN complete THEN last_arrive_ns - second_arrive_ns END AS last_margin_ns,
    key_source,
    complete
FROM (SELECT *, COALESCE(comm_size, n_ranks) AS n FROM merge_coll_group_of('_merge_coll_arrivals'));
