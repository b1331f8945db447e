-- _tp_step_owners: the NVTX step that owns each stretch of a rank's CPU time, for tp_step_ops.
-- Why: a launch belongs to the matching NVTX range holding it that ends last; these intervals
--   make that a lookup (_interval_buckets) instead of a search over the ranges.
-- Columns: rank INTEGER, start_ns BIGINT ns (a matching range's start), end_ns BIGINT ns (the
--   latest end of the ranges started at or before it), step BIGINT (the step of that range; ties:
--   the larger step number).
-- Definition: the ranges of _tp_nvtx_step_ranges sorted by start, with the running maximum of
--   their end and the running arg-max of (end, step); one row per distinct start.
-- stage: rank
-- result: step
-- requires: _tp_nvtx_step_ranges
CREATE OR REPLACE VIEW _tp_step_owners AS
WITH per_start AS (
    SELECT rank, start_ns, max(end_ns) AS end_ns, arg_max(step, {'e': end_ns, 's': step}) AS step
    FROM _tp_nvtx_step_ranges
    GROUP BY rank, start_ns
)
SELECT rank, start_ns,
       max(end_ns) OVER w AS end_ns,
       arg_max(step, {'e': end_ns, 's': step}) OVER w AS step
FROM per_start
WINDOW w AS (PARTITION BY rank ORDER BY start_ns ROWS UNBOUNDED PRECEDING);
