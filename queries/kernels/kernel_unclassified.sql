-- kernel_unclassified: the kernel names no rule classifies (category 'other'), largest first.
-- Why: the candidates for a `classify --rules` line (`nsight-analyze classify --list-other`).
-- Columns:
--   name VARCHAR, subcategory VARCHAR   the kernel name and what rule left it there (if any)
--   instances BIGINT         kernel instances
--   ranks BIGINT             ranks that ran it
--   total_ns BIGINT ns       summed durations
--   pct DOUBLE %             of all kernel time
-- columns: name, subcategory, instances, ranks, total_ns, pct
-- stage: live
-- requires: kernels
CREATE OR REPLACE VIEW kernel_unclassified AS
SELECT name, subcategory, count(*) AS instances, count(DISTINCT rank) AS ranks,
       CAST(sum(end_ns - start_ns) AS BIGINT) AS total_ns,
       100.0 * sum(end_ns - start_ns) / NULLIF((SELECT sum(end_ns - start_ns) FROM kernels), 0) AS pct
FROM kernels
WHERE category = 'other'
GROUP BY name, subcategory
ORDER BY total_ns DESC, name;
