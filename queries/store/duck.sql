-- The statements of the DuckDB connections' module (nsight_analyze/store/duck.py).

-- name: relation_count
-- The tables and views (TEMP ones included) named $name (an SQL string literal).
SELECT (SELECT count(*) FROM duckdb_views() WHERE view_name = $name)
 + (SELECT count(*) FROM duckdb_tables() WHERE table_name = $name)
