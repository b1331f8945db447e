-- The statements of the per-rank / per-step time partition summary (nsight_analyze/summary.py).

-- name: partition_by_rank
-- The whole capture per rank ($columns: partition.TP_COLUMNS).
SELECT rank, $columns, overlap_pct FROM time_partition
WHERE step IS NULL ORDER BY rank

-- name: column_sum
-- One partition column summed over the ranks of a step.
sum($column)::BIGINT AS $column

-- name: partition_by_step
-- One row per step: each column summed over the ranks that have it ($sums: column_sum per
-- column), the job's step time (the longest window, that of slowest_rank) and the shortest.
SELECT step, count(*) AS ranks, $sums,
CASE WHEN sum(comms_total_ns) > 0 THEN 100.0 * sum(comms_hidden_ns) / sum(comms_total_ns) END
AS overlap_pct, max(window_ns)::BIGINT AS job_step_ns,
arg_max(rank, (window_ns, -rank)) AS slowest_rank, min(window_ns)::BIGINT AS min_window_ns
FROM time_partition WHERE step IS NOT NULL GROUP BY step ORDER BY step

-- name: partition_by_rank_step
-- The time_partition step rows as they are ($columns: partition.TP_COLUMNS).
SELECT step, rank, $columns, overlap_pct FROM time_partition
WHERE step IS NOT NULL ORDER BY step, rank

-- name: kernel_totals_from_summary
-- Per kernel name: its category, instances and summed GPU time over all ranks (kernel_summary).
SELECT name, mode(category) AS category, sum(instances)::BIGINT AS instances,
sum(total_ns)::BIGINT AS total_ns FROM kernel_summary GROUP BY name

-- name: kernel_totals
-- The same from the kernels, without kernel_summary.
SELECT name, mode(category) AS category, count(*) AS instances,
sum(end_ns - start_ns)::BIGINT AS total_ns FROM kernels GROUP BY name

-- name: top_kernels
-- The $limit kernels of $totals (kernel_totals*) with the most GPU time, with their share (LIMIT
-- inlined: a bound parameter imports pandas, duck.sql_string).
SELECT *, 100.0 * total_ns / nullif(sum(total_ns) OVER (), 0) AS pct FROM ($totals)
ORDER BY total_ns DESC, name LIMIT $limit

-- name: one_time_steps
-- Per step: whether it holds one-time work on some rank.
SELECT step, bool_or(one_time) FROM job_steps GROUP BY step

-- name: job_step_times
-- Per step: the job step time, whether it holds one-time work and whether it is steady.
SELECT step, max(job_step_ns), bool_or(one_time), bool_and(steady) FROM job_steps
GROUP BY step ORDER BY step

-- name: step_sources
-- Per rank: every source of its steps, comma-separated.
SELECT rank, string_agg(DISTINCT source, ', ' ORDER BY source) FROM steps
GROUP BY rank ORDER BY rank

-- name: corrupt_timing_warnings
-- The ingest's corrupt-timing warnings (CORRUPT_TIMING, $prefix: its SQL literal) of the files of
-- the ranks shown, one row per file and warning: what `summary` prints above the partition and
-- diagnose's corrupt-timing note lists (the prefix inlined: a bound parameter imports pandas,
-- duck.sql_string).
SELECT f.path, list_sort(list(DISTINCT r.rank)) AS ranks, u.w AS warning
    FROM files AS f, unnest(f.warnings) AS u(w)
    JOIN ranks AS r ON r.file_id = f.file_id
    WHERE starts_with(u.w, $prefix)
    GROUP BY f.path, u.w ORDER BY f.path, u.w

-- name: timing_warning_lines
-- The warnings of $corrupt_timing (CORRUPT_TIMING_SQL) as `path: warning`.
SELECT path || ': ' || warning FROM ($corrupt_timing)
