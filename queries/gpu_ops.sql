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
--   memops are 'memory', except kind 'PtoP' (peer copies) which is 'comms'.
-- columns: rank, device_id, stream_id, start_ns, end_ns, duration_ns, op, name, category, correlation_id
-- stage: live
-- requires: kernels, memops
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
    rank, device_id, stream_id, start_ns, end_ns, end_ns - start_ns AS duration_ns,
    CASE WHEN lower(kind) = 'memset' THEN 'memset' ELSE 'memcpy' END AS op,
    CASE WHEN lower(kind) = 'memset' THEN '[CUDA memset]' ELSE '[CUDA memcpy ' || coalesce(kind, '?') || ']' END AS name,
    CASE WHEN kind = 'PtoP' THEN 'comms' ELSE 'memory' END AS category,
    correlation_id
FROM memops;
