-- tp_step_ops: GPU operations projected onto NVTX steps (the step whose range holds the launch).
-- Why: GPU work runs later than the CPU code that launched it; a kernel belongs to the step
-- that *launched* it, not to the step its GPU time overlaps (docs/metrics.md "Steps").
-- Columns: rank INTEGER, step BIGINT, start_ns BIGINT ns, end_ns BIGINT ns (the GPU operation).
-- Definition: an operation belongs to step N when its launch call (cuda_api, same rank and
--   correlation_id) starts inside a matching NVTX range [start_ns, end_ns) of the rank. When the
--   launch lies in several matching ranges (nested or overlapping), the one that ends last wins
--   (the outermost; ties: the larger step number). Vectorised: ranges sorted by start carry a
--   running arg-max of their end (_tp_step_owners), and each launch finds the last range started
--   at or before it (_interval_buckets: a hash join; an ASOF join sorted every launch).
-- columns: rank, step, start_ns, end_ns
-- stage: rank
-- result: stored
-- requires: _tp_step_owners, _op_launches, _interval_buckets, _bucket_of
CREATE OR REPLACE VIEW tp_step_ops AS
WITH owner AS MATERIALIZED (FROM _interval_buckets('_tp_step_owners')),
launched AS (
    SELECT l.rank, l.start_ns, l.end_ns, l.launch_ns,
           _bucket_of(l.launch_ns, g.origin_ns, g.width_ns, g.last_bucket) AS bucket
    FROM _op_launches AS l
    JOIN (SELECT DISTINCT rank, origin_ns, width_ns, last_bucket FROM owner) AS g ON g.rank = l.rank
    WHERE l.launched
)
SELECT l.rank, w.step, l.start_ns, l.end_ns
FROM launched AS l
JOIN owner AS w ON w.rank = l.rank AND w.bucket = l.bucket AND l.launch_ns >= w.start_ns AND l.launch_ns < w.until_ns;
