-- idle_by_cause: per rank and idle cause, the gap pieces and their time over the whole capture.
-- Why: the report's idle-causes figure, reachable with `nsight-analyze sql`.
-- Columns:
--   rank INTEGER
--   cause VARCHAR            launch_gap | input_stall | sync_stall | host_bound | idle_other (gaps)
--   pieces BIGINT            gap pieces of that cause
--   total_ns BIGINT ns       their summed durations (= time_partition's idle part of that cause)
-- Definition: gaps of the whole-capture window (step IS NULL), grouped.
-- columns: rank, cause, pieces, total_ns
-- stage: rank
-- result: stored
-- requires: gaps
CREATE OR REPLACE VIEW idle_by_cause AS
SELECT rank, cause, count(*) AS pieces, sum(duration_ns)::BIGINT AS total_ns
FROM gaps WHERE step IS NULL
GROUP BY rank, cause;
