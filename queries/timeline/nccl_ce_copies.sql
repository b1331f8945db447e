-- nccl_ce_copies: the memory operations that move an NCCL copy-engine collective's data.
-- Why: NCCL >= 2.28 (`ce-coll`, NCCL >= 2.29 for the Nsight Systems trace) can run a collective
-- (AllGather, AllToAll, ...) on the copy engines: its transfer is a memcpy, not a kernel, and is
-- communication, not memory traffic. gpu_ops gives these copies the category comms, so the time
-- partition, the gaps and the what-if count them as communication (docs/metrics.md "Collectives").
-- Columns:
--   rank INTEGER, correlation_id BIGINT (the memop's, = memops.correlation_id: one launch call may
--   issue several copies, cudaMemcpyBatchAsync), range VARCHAR (the NCCL range around the call:
--   CE Batch | CE Sync)
-- Definition: a memop whose launching CUDA call (same rank and correlation id) starts inside an
--   NVTX range named `CE Batch` or `CE Sync` (Nsight Systems' advanced NCCL trace, 2025.6.1+,
--   `--nccl-trace=...,ce-batch,ce-sync`) on the same thread, in a domain whose name holds "NCCL"
--   (or with no domain name: the domain-create row can be missing). These range names are from the documents, not yet
--   from a real capture. Without such ranges (every trace before NCCL 2.28, or without the advanced
--   trace) no memop is one; PtoP copies are communication in gpu_ops already.
-- columns: rank, correlation_id, range
-- stage: live
-- requires: memops, cuda_api, nvtx
CREATE OR REPLACE VIEW nccl_ce_copies AS
WITH ce AS (
    SELECT rank, tid, start_ns, end_ns, text
    FROM nvtx
    WHERE text IN ('CE Batch', 'CE Sync') AND end_ns IS NOT NULL AND coalesce(domain, 'NCCL') ILIKE '%nccl%'
),
calls AS (
    -- launch calls of the memops of ranks with CE ranges (none: an empty build side, nothing read)
    SELECT DISTINCT a.rank, a.tid, a.start_ns, a.correlation_id, t.text
    FROM (
        SELECT DISTINCT rank, correlation_id FROM memops
        WHERE rank IN (SELECT DISTINCT rank FROM ce)
    ) AS m
    JOIN cuda_api AS a ON a.rank = m.rank AND a.correlation_id = m.correlation_id
    CROSS JOIN (VALUES ('CE Batch'), ('CE Sync')) AS t(text)  -- CE Sync may nest in CE Batch
)
SELECT DISTINCT c.rank, c.correlation_id, c.text AS range
FROM calls AS c
ASOF JOIN ce ON ce.rank = c.rank AND ce.tid = c.tid AND ce.text = c.text AND c.start_ns >= ce.start_ns
WHERE c.start_ns < ce.end_ns;
