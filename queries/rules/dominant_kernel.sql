-- The statements of the `dominant-kernel` finding (nsight_analyze/rules/dominant_kernel.py).
-- $kernel: the dominant kernel's name as the body of an SQL string literal (quotes doubled).

-- name: largest_kernel
-- The kernel name with the most kernel time over all ranks, and its share of all kernel time.
SELECT name, mode(category) AS category, mode(subcategory) AS subcategory,
       sum(instances) AS instances, sum(total_ns) AS total_ns,
       100.0 * sum(total_ns) / (SELECT nullif(sum(total_ns), 0) FROM kernel_summary) AS pct
FROM kernel_summary GROUP BY name ORDER BY total_ns DESC, name LIMIT 1

-- name: kernel_per_rank
-- The kernel's statistics on every rank.
SELECT rank, name, category, instances, total_ns, avg_ns, med_ns, min_ns, max_ns,
       round(pct, 2) AS pct FROM kernel_summary
WHERE name = '$kernel' ORDER BY rank

-- name: name_precision
-- The name's input type (queries/kernels/gemm_precision.sql), one reading for the signal and the
-- fixes.
SELECT gemm_precision('$kernel')

-- name: comms_overlap
-- The mean share of communication time hidden behind other GPU work, over the windows with
-- communication.
SELECT avg(overlap_pct) FROM diag_windows WHERE comms_total_ns > 0

-- name: kernel_roofline
-- The kernel's mean achieved share of the roofline, its bound and the counters' source.
SELECT avg(pct_of_roof) AS p, any_value(bound) AS b, any_value(source) AS s
FROM roofline WHERE name = '$kernel' AND pct_of_roof IS NOT NULL

-- name: kernel_launches
-- The dominant kernel's launches, for the shapes of the ops that launched them (op_roofline).
SELECT rank, correlation_id, name, duration_ns FROM kernels WHERE name = '$kernel'
