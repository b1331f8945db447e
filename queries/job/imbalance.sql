-- imbalance: per job and step, how unevenly compute is spread over the job's ranks, and what it costs.
-- Why: synchronous data-parallel training runs at the pace of its slowest rank; the other
-- ranks idle at the next collective for the difference (see docs/metrics.md "Imbalance").
-- Columns (definition in merge_imbalance_of):
--   job INTEGER (see `jobs`), step BIGINT (NULL = whole capture), ranks BIGINT, max_compute_ns BIGINT ns,
--   mean_compute_ns DOUBLE ns, ratio DOUBLE (max/mean), slowest_rank INTEGER,
--   wait_gpu_ns BIGINT GPU-ns (sum over ranks of max - own compute), balanced BOOLEAN
--   (ratio < settings.imbalance_balanced_ratio, default 1.05).
-- Source: time_partition.compute_ns per (rank, step); steps are matched across a job's ranks by number.
-- columns: job, step, ranks, max_compute_ns, mean_compute_ns, ratio, slowest_rank, wait_gpu_ns, balanced
-- stage: job
-- result: stored
-- requires: merge_imbalance_of, time_partition
CREATE OR REPLACE VIEW imbalance AS
SELECT * FROM merge_imbalance_of('time_partition');
