-- gpu_ops: every GPU operation of every rank (kernels ∪ memcpy/memset), with its category.
-- Why: the single input of the time partition, steps, gaps and launch statistics, so that
-- every analysis agrees on what counts as GPU work and how it is classified (docs/metrics.md).
-- Columns:
--   rank INTEGER, device_id INTEGER, stream_id BIGINT
--   start_ns, end_ns, duration_ns BIGINT ns (file timeline of the rank)
--   op VARCHAR: kernel | memcpy | memset
--   name VARCHAR: kernel name (demangled); '[CUDA memcpy <kind>]' or '[CUDA memset]' for memops
--   category VARCHAR: compute | memory | comms | other
--   correlation_id BIGINT (joins the launching call in cuda_api)
-- Definition: kernels take kernels.category (NULL or unknown values count as 'other');
--   memops are 'memory', except kind 'PtoP' (peer copies) and the copies of NCCL copy-engine
--   collectives (nccl_ce_copies: issued inside NCCL's CE Batch / CE Sync ranges), which are 'comms'.
-- columns: rank, device_id, stream_id, start_ns, end_ns, duration_ns, op, name, category, correlation_id
-- stage: live
-- requires: kernels, memops, nccl_ce_copies
CREATE OR REPLACE VIEW gpu_ops AS
SELECT
    rank, device_id, stream_id, start_ns, end_ns, end_ns - start_ns AS duration_ns,
    'kernel' AS op,
    name,
    CASE WHEN category IN ('compute', 'memory', 'comms', 'other') THEN category ELSE 'other' END AS category,
    correlation_id
FROM kernels
UNION ALL
SELECT
    m.rank, m.device_id, m.stream_id, m.start_ns, m.end_ns, m.end_ns - m.start_ns AS duration_ns,
    CASE WHEN lower(m.kind) = 'memset' THEN 'memset' ELSE 'memcpy' END AS op,
    CASE WHEN lower(m.kind) = 'memset' THEN '[CUDA memset]' ELSE '[CUDA memcpy ' || coalesce(m.kind, '?') || ']' END
        AS name,
    CASE WHEN m.kind = 'PtoP' OR ce.correlation_id IS NOT NULL THEN 'comms' ELSE 'memory' END AS category,
    m.correlation_id
FROM memops AS m
LEFT JOIN (SELECT DISTINCT rank, correlation_id FROM nccl_ce_copies) AS ce
    ON ce.rank = m.rank AND ce.correlation_id = m.correlation_id;
