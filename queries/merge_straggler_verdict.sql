-- merge_straggler_verdict: the job's imbalance verdict over `imbalance` (see merge_verdict_of).
-- Why: one row that the `ranks` command, the report and diagnoses read for the straggler call.
-- Columns: verdict, steps, imbalanced_steps, median_ratio, top_rank, top_share, straggler_rank,
--   straggler_delay_ns (ns), straggler_cost_ns (GPU-ns); definitions in merge_verdict_of.sql.
-- columns: verdict, steps, imbalanced_steps, median_ratio, top_rank, top_share, straggler_rank, straggler_delay_ns, straggler_cost_ns
-- stage: job
-- result: stored
-- requires: imbalance, merge_verdict_of
CREATE OR REPLACE VIEW merge_straggler_verdict AS
SELECT * FROM merge_verdict_of('imbalance');
