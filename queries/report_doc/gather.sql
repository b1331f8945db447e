-- The statements of the report document's sections (nsight_analyze/report_doc/gather.py).

-- name: steps_chosen
-- Whether the workspace has a step that --steps selects ($steps: StepRange.sql()).
SELECT EXISTS (SELECT 1 FROM steps WHERE $steps)

-- name: step_part_sum
-- One partition column ($column) added up over the chosen steps' rows: a select item of
-- steps_partition.
sum($column)::BIGINT AS $column

-- name: steps_partition
-- Per rank, the time_partition step rows of the chosen steps ($steps) added up ($sums: a
-- step_part_sum per partition column but overlap_pct), so the parts still tile; the overlap is
-- that of the sums.
SELECT rank, $sums,
       100.0 * sum(comms_hidden_ns) / nullif(sum(comms_total_ns), 0) AS overlap_pct
FROM time_partition WHERE $steps GROUP BY rank ORDER BY rank

-- name: rank_step_partition
-- Each rank's time_partition step rows of the chosen steps ($steps, on t.step) with whether the
-- step is steady (job_steps; a step it does not list counts as steady).
SELECT t.*, coalesce(j.steady, true) AS steady
FROM time_partition AS t JOIN ranks AS r USING (rank) LEFT JOIN job_steps AS j
ON j.job = r.job AND j.step = t.step WHERE $steps
ORDER BY rank, step

-- name: longest_gaps
-- The 15 longest GPU idle gaps over the ranks shown, with their cause and what the host was doing.
SELECT rank, step, cause, duration_ns, host_activity FROM longest_gaps
ORDER BY duration_ns DESC, rank, start_ns LIMIT 15
