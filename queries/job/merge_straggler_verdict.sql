-- merge_straggler_verdict: each job's imbalance verdict over `imbalance`, one row per job (see merge_verdict_of).
-- Why: what the `ranks` command, the report and diagnoses read for the straggler call (one row
-- for a workspace of one job).
-- Columns: job, verdict, steps, imbalanced_steps, median_ratio, top_rank, top_share, straggler_rank,
--   straggler_delay_ns (ns), straggler_cost_ns (GPU-ns); definitions in merge_verdict_of.sql.
-- columns: job, verdict, steps, imbalanced_steps, median_ratio, top_rank, top_share, straggler_rank, straggler_delay_ns, straggler_cost_ns
-- stage: job
-- result: stored
-- requires: imbalance, merge_verdict_of
CREATE OR REPLACE VIEW merge_straggler_verdict AS
SELECT * FROM merge_verdict_of('imbalance');
