-- The statements of the live layer's module (nsight_analyze/store/live_layer.py).

-- name: stored_views
-- The views of the workspace's own main schema (not TEMP ones, not DuckDB's internal ones).
SELECT view_name FROM duckdb_views()
WHERE NOT temporary AND database_name = current_database() AND schema_name = 'main' AND NOT internal

-- name: stored_tables
-- The tables of the workspace's own main schema (not TEMP ones).
SELECT table_name FROM duckdb_tables()
WHERE NOT temporary AND database_name = current_database() AND schema_name = 'main'

-- name: stamp_layer
-- The layer's hash and the schema version ($layer_hash, $schema_version: SQL string literals)
-- stored in `meta`.
INSERT OR REPLACE INTO meta VALUES ('queries_hash', $layer_hash), ('schema_version', $schema_version)
