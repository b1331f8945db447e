-- merge_nccl_kernels: every NCCL kernel with the key that matches it across ranks.
-- Why: a collective is one operation seen on several ranks; matching needs a key that is
-- the same on every participant without relying on clocks (which are what we align).
-- Key = (op, comm, seq):
--   * with NCCL's NVTX payload (merge_nccl_payload): comm = communicator id, seq = the
--     payload's sequence number, else the ordinal of the kernel among the rank's kernels
--     of the same op on that communicator (0-based, by start time);
--   * without: comm = 'stream<i>' where i is the rank's i-th stream (by stream id) that
--     carries this op, seq = ordinal of the kernel on that stream among kernels of this op.
--     (nth AllReduce on rank A <-> nth AllReduce on rank B.)
-- Columns:
--   rank, stream_id, start_ns, end_ns, duration_ns (ns, file clock), correlation_id,
--   op       VARCHAR  AllReduce | AllGather | ReduceScatter | Reduce | Broadcast | SendRecv | ...
--   comm     VARCHAR  communicator id or stream ordinal (see above)
--   seq      BIGINT   sequence within (op, comm)
--   bytes    BIGINT   message size from the payload (NULL when unknown)
--   key_source VARCHAR nvtx-payload | stream-ordinal
CREATE OR REPLACE VIEW merge_nccl_kernels AS
WITH k AS (
    SELECT
        rank, stream_id, start_ns, end_ns, duration_ns, correlation_id,
        COALESCE(NULLIF(regexp_extract(
            name,
            '^(?:void )?nccl(?:Symk?DevKernel_|DevKernel_|Kernel_)?'
            || '(AllReduce|AllGatherV|AllGather|ReduceScatter|Reduce|Broadcast|SendRecv|Send|Recv|AllToAll|Generic)',
            1), ''), 'Other') AS op
    FROM kernels
    WHERE name LIKE 'nccl%' OR name LIKE 'void nccl%'
),
keyed AS (
    SELECT
        k.*,
        p.comm AS payload_comm,
        p.payload_seq,
        p.bytes
    FROM k
    LEFT JOIN merge_nccl_payload AS p ON p.rank = k.rank AND p.correlation_id = k.correlation_id
),
streams AS (
    SELECT
        *,
        DENSE_RANK() OVER (PARTITION BY rank, op ORDER BY stream_id) - 1 AS stream_idx
    FROM keyed
)
SELECT
    rank, stream_id, start_ns, end_ns, duration_ns, correlation_id, op,
    COALESCE(payload_comm, 'stream' || CAST(stream_idx AS VARCHAR)) AS comm,
    CASE
        WHEN payload_comm IS NOT NULL THEN COALESCE(
            payload_seq,
            ROW_NUMBER() OVER (PARTITION BY rank, op, payload_comm ORDER BY start_ns, correlation_id) - 1)
        ELSE ROW_NUMBER() OVER (PARTITION BY rank, op, stream_idx, payload_comm IS NULL
                                ORDER BY start_ns, correlation_id) - 1
    END AS seq,
    bytes,
    CASE WHEN payload_comm IS NOT NULL THEN 'nvtx-payload' ELSE 'stream-ordinal' END AS key_source
FROM streams;
