-- The statements of one job's scope (nsight_analyze/store/job_scope.py).

-- name: busy_ranks_of_job
-- The ranks with GPU operations of job j ($main: the workspace's own schema), what the default
-- job is chosen by.
(SELECT count(*) FROM $main.tp_capture c JOIN $main.ranks r USING (rank) WHERE r.job = j.job)

-- name: jobs_in_order
-- The jobs with their ranks, the one to show by default first ($busy: busy_ranks_of_job, or 0
-- when the workspace has no tp_capture).
SELECT j.job, j.label, j.first_rank, j.last_rank, j.ranks,
(SELECT list(rank ORDER BY rank) FROM $main.ranks r WHERE r.job = j.job)
FROM $main.jobs j ORDER BY $busy DESC, j.ranks DESC, j.job

-- name: session_table_columns
-- The TEMP tables (results computed for this session) with their column names, those already
-- renamed out of the way left out.
SELECT c.table_name, list(c.column_name ORDER BY c.column_index) FROM duckdb_columns() AS c
JOIN duckdb_tables() AS t USING (database_name, schema_name, table_name)
WHERE t.temporary AND NOT starts_with(c.table_name, '_unscoped_') GROUP BY c.table_name

-- name: unscope_session_table
-- A TEMP table renamed out of the way of the view of the same name that scopes it.
ALTER TABLE temp.main."$table" RENAME TO "_unscoped_$table"

-- name: ranks_view
-- A TEMP view of $source showing only the job's ranks' rows ($ranks: an IN-list).
CREATE OR REPLACE TEMP VIEW "$table" AS SELECT * FROM $source WHERE rank IN ($ranks)

-- name: job_view
-- A TEMP view of $source showing only the job's rows.
CREATE OR REPLACE TEMP VIEW "$table" AS SELECT * FROM $source WHERE job = $job
