-- tp_capture: the whole-capture window of each rank (helper of steps/time_partition).
-- Why: every rank has one window over its whole capture (the step = NULL rows of the partition,
--   all a trace without step markers has), and merge_jobs dates a capture by its first GPU operation.
-- Columns: rank INTEGER, start_ns BIGINT ns, end_ns BIGINT ns, ops BIGINT (GPU operations).
-- Definition (docs/metrics.md "Windows"): [min(start_ns), max(end_ns)) over the rank's GPU
--   operations (kernels and memops, zero-length ones included). Ranks without GPU operations
--   have no row (and therefore no partition).
-- columns: rank, start_ns, end_ns, ops
-- stage: rank
-- result: stored
-- requires: gpu_ops
CREATE OR REPLACE VIEW tp_capture AS
SELECT rank, min(start_ns)::BIGINT AS start_ns, max(end_ns)::BIGINT AS end_ns, count(*) AS ops
FROM gpu_ops
WHERE start_ns IS NOT NULL AND end_ns IS NOT NULL
GROUP BY rank;
