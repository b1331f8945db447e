-- kernel_duration_totals: per kind of kernel and distinct duration, the instances of every rank
--   (kernel_duration_counts summed over the ranks).
-- Why: compare's rank test of per-instance durations sums the counts over the ranks both runs
--   have; when that is every rank of the run (the usual case), it reads these totals (one row
--   per kind and distinct duration of the job) instead of summing the per-rank counts, which
--   are many times more rows.
-- Columns: kind UBIGINT (kernel_kinds.kind), duration_ns BIGINT ns, instances BIGINT.
-- Definition: sum of kernel_duration_counts.instances over all ranks, per kind and duration.
-- columns: kind, duration_ns, instances
-- stage: job
-- result: stored
-- requires: kernel_duration_counts
CREATE OR REPLACE VIEW kernel_duration_totals AS
SELECT kind, duration_ns, sum(instances)::BIGINT AS instances
FROM kernel_duration_counts
GROUP BY kind, duration_ns;
