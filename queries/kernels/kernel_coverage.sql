-- kernel_coverage: kernel time per category and subcategory, all ranks together.
-- Why: how much GPU time the kernel rules (data/kernel_rules.csv, `classify --rules`) explain;
--   category 'other' is what no rule explains (`nsight-analyze classify --by-subcategory`).
-- Columns:
--   category VARCHAR, subcategory VARCHAR   the kernels' classification
--   kernels BIGINT           kernel instances
--   names BIGINT             distinct kernel names
--   total_ns BIGINT ns       summed kernel durations
--   pct DOUBLE %             of all kernel time
-- columns: category, subcategory, kernels, names, total_ns, pct
-- stage: live
-- requires: kernels
CREATE OR REPLACE VIEW kernel_coverage AS
SELECT category, subcategory, count(*) AS kernels, count(DISTINCT name) AS names,
       CAST(sum(end_ns - start_ns) AS BIGINT) AS total_ns,
       100.0 * sum(end_ns - start_ns) / NULLIF(sum(sum(end_ns - start_ns)) OVER (), 0) AS pct
FROM kernels
GROUP BY category, subcategory
ORDER BY CASE category WHEN 'compute' THEN 0 WHEN 'memory' THEN 1 WHEN 'comms' THEN 2 ELSE 3 END,
         total_ns DESC, subcategory;
