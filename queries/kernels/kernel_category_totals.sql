-- kernel_category_totals: kernel time per category, all ranks together.
-- Why: the headline of `nsight-analyze classify`: compute, memory, comms and what no rule explains.
-- Columns:
--   category VARCHAR         compute | memory | comms | other
--   kernels BIGINT           kernel instances
--   names BIGINT             distinct kernel names
--   total_ns BIGINT ns       summed kernel durations
--   pct DOUBLE %             of all kernel time
-- columns: category, kernels, names, total_ns, pct
-- stage: live
-- requires: kernels
CREATE OR REPLACE VIEW kernel_category_totals AS
SELECT category, count(*) AS kernels, count(DISTINCT name) AS names,
       CAST(sum(end_ns - start_ns) AS BIGINT) AS total_ns,
       100.0 * sum(end_ns - start_ns) / NULLIF(sum(sum(end_ns - start_ns)) OVER (), 0) AS pct
FROM kernels
GROUP BY category
ORDER BY CASE category WHEN 'compute' THEN 0 WHEN 'memory' THEN 1 WHEN 'comms' THEN 2 ELSE 3 END;
