-- The statements of the rule context Ctx and its evidence tables (nsight_analyze/rules/base.py).

-- name: objects
-- The views, tables and macros the workspace holds (Ctx.has).
SELECT view_name FROM duckdb_views() UNION SELECT table_name FROM duckdb_tables()
UNION SELECT function_name FROM duckdb_functions() WHERE function_type IN
('table_macro', 'macro')

-- name: job_shape
-- The job's steps, whether it has steps at all, and its ranks.
SELECT count(DISTINCT step) AS steps, bool_or(step IS NOT NULL) AS has_steps,
       count(DISTINCT rank) AS ranks FROM diag_windows

-- name: mean_step
-- The job step time over the steady steps (queries/steps/job_steps.sql).
SELECT avg(w) FILTER (WHERE steady) FROM (SELECT d.step, max(d.window_ns) AS w,
coalesce(bool_and(j.steady), true) AS steady FROM diag_windows AS d
LEFT JOIN job_steps AS j ON j.step = d.step GROUP BY d.step)

-- name: row_count
-- The rows of an evidence query ($sql), counted only when it has more than are kept.
SELECT count(*) FROM ($sql)
