-- _merge_coll_arrivals: each NCCL kernel keyed for matching, on the aligned timeline.
-- Why: the common input of the collective views; arrival = aligned kernel start.
-- Columns: rank, host (clock domain), op, comm, seq, stream_id, correlation_id, duration_ns (ns),
--   bytes, key_source (see merge_nccl_kernels), arrive_ns BIGINT ns (aligned start),
--   aligned_end_ns BIGINT ns (aligned end).
-- stage: job
-- result: view
-- requires: merge_nccl_kernels, merge_rank_clock
CREATE OR REPLACE VIEW _merge_coll_arrivals AS
SELECT
    n.rank, c.host, n.op, n.comm, n.seq, n.stream_id, n.correlation_id, n.duration_ns, n.bytes,
    n.key_source,
    n.start_ns + c.clock_offset_ns AS arrive_ns,
    n.end_ns + c.clock_offset_ns AS aligned_end_ns
FROM merge_nccl_kernels AS n
JOIN merge_rank_clock AS c ON c.rank = n.rank;
