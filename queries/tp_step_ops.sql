-- tp_step_ops: GPU operations projected onto NVTX steps (the step whose range holds the launch).
-- Why: GPU work runs later than the CPU code that launched it; a kernel belongs to the step
-- that *launched* it, not to the step its GPU time overlaps (docs/metrics.md "Steps").
-- Columns: rank INTEGER, step BIGINT, start_ns BIGINT ns, end_ns BIGINT ns (the GPU operation).
-- Definition: an operation belongs to step N when its launch call (cuda_api, same rank and
--   correlation_id) starts inside a matching NVTX range [start_ns, end_ns) of the rank. When the
--   launch lies in several matching ranges (nested or overlapping), the one that ends last wins
--   (the outermost; ties: the larger step number). Vectorised: ranges sorted by start carry a
--   running arg-max of their end, and each launch ASOF-joins the last range started at or
--   before it.
-- columns: rank, step, start_ns, end_ns
-- stage: rank
-- result: stored
-- requires: _tp_nvtx_step_ranges, _op_launches
CREATE OR REPLACE VIEW tp_step_ops AS
WITH per_start AS (
    SELECT rank, start_ns, max(end_ns) AS end_ns, arg_max(step, {'e': end_ns, 's': step}) AS step
    FROM _tp_nvtx_step_ranges
    GROUP BY rank, start_ns
),
owner AS (
    SELECT
        rank, start_ns,
        max(end_ns) OVER w AS owner_end,
        arg_max(step, {'e': end_ns, 's': step}) OVER w AS owner_step
    FROM per_start
    WINDOW w AS (PARTITION BY rank ORDER BY start_ns ROWS UNBOUNDED PRECEDING)
),
launched AS (
    SELECT rank, start_ns, end_ns, launch_ns
    FROM _op_launches
    WHERE launched AND rank IN (SELECT DISTINCT rank FROM _tp_nvtx_step_ranges)
)
SELECT l.rank, w.owner_step AS step, l.start_ns, l.end_ns
FROM launched AS l
ASOF JOIN owner AS w ON w.rank = l.rank AND w.start_ns <= l.launch_ns
WHERE w.owner_end > l.launch_ns;
