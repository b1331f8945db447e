-- kernel_summary: per rank and kernel name, how often it ran and how long (nsys `gpukernsum` parity).
-- Why: the first question about any profile is "which kernels take the time"; matching NVIDIA's
-- own report number for number lets users trust the rest of the analysis.
-- Columns:
--   rank INTEGER, name VARCHAR (demangled kernel name), category VARCHAR (compute | memory |
--   comms | other; the most frequent category among the name's instances),
--   instances BIGINT, total_ns BIGINT ns, avg_ns DOUBLE ns, med_ns DOUBLE ns, min_ns BIGINT ns,
--   max_ns BIGINT ns, stddev_ns DOUBLE ns, pct DOUBLE % (share of the rank's summed kernel time),
--   subcategory VARCHAR (most frequent subcategory, e.g. gemm, attention, allreduce)
-- Definition: duration = end_ns - start_ns of every kernel of the rank (all devices, streams);
--   med = ordinary median (mean of the two middle values for even counts); stddev = sample
--   standard deviation (n - 1), 0 for a single instance. Unlike nsys 2022.4, rows are per name,
--   not per (name, grid, block), and per rank, not per file.
-- columns: rank, name, category, instances, total_ns, avg_ns, med_ns, min_ns, max_ns, stddev_ns, pct, subcategory
-- stage: rank
-- result: stored
-- requires: kernels
CREATE OR REPLACE VIEW kernel_summary AS
WITH k AS (
    SELECT rank, name, category, subcategory, end_ns - start_ns AS d
    FROM kernels
)
SELECT
    rank,
    name,
    mode(category) AS category,
    count(*) AS instances,
    CAST(sum(d) AS BIGINT) AS total_ns,
    avg(d) AS avg_ns,
    CAST(median(d) AS DOUBLE) AS med_ns,
    min(d) AS min_ns,
    max(d) AS max_ns,
    coalesce(stddev_samp(d), 0.0) AS stddev_ns,
    100.0 * sum(d) / NULLIF(sum(sum(d)) OVER (PARTITION BY rank), 0) AS pct,
    mode(subcategory) AS subcategory
FROM k
GROUP BY rank, name
ORDER BY rank, total_ns DESC, name;
