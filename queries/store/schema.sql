-- The statements of the canonical tables' module (nsight_analyze/store/schema.py).

-- name: table_columns
-- Each table (not view) of the connection's main database with its column names, in catalog order.
SELECT c.table_name, list(c.column_name ORDER BY c.column_index) FROM duckdb_columns() AS c
JOIN duckdb_tables() AS t ON t.database_name = c.database_name AND t.schema_name = c.schema_name
AND t.table_name = c.table_name
WHERE c.schema_name = 'main' AND c.database_name = current_database() GROUP BY c.table_name
