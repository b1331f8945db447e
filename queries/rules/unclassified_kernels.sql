-- The statements of the `unclassified-kernels` finding (nsight_analyze/rules/unclassified_kernels.py).

-- name: unclassified_ranks
-- The ranks that ran kernels no rule classifies.
SELECT DISTINCT rank FROM kernel_summary WHERE category = 'other' ORDER BY rank

-- name: unclassified_kernels
-- Kernel names no rule matches, largest first, all ranks (as `classify --list-other`).
SELECT name, sum(instances) AS instances, count(DISTINCT rank) AS ranks,
       sum(total_ns) AS total_ns,
       round(100.0 * sum(total_ns)
             / (SELECT sum(total_ns) FROM kernel_summary), 2) AS pct
FROM kernel_summary WHERE category = 'other'
GROUP BY name ORDER BY total_ns DESC, name
