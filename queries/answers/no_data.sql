-- The statements of what a workspace holds when a command has nothing to work on (nsight_analyze/no_data.py).

-- name: table_names
SELECT table_name FROM duckdb_tables()

-- name: has_rows
-- Whether $table (a table's name) holds any row.
SELECT EXISTS (SELECT 1 FROM $table)

-- name: ncu_kernel_launches
SELECT count(*) FROM ncu_kernels

-- name: profiler_range_kernels
SELECT count(*) FROM kineto_profiler_ranges

-- name: dcgm_samples
SELECT count(*) FROM gpu_metrics WHERE source = 'dcgm'

-- name: recipe_rows
-- NVIDIA's recipe output ingested without the reports it was computed from (nsys-jax archives).
SELECT count(*) FROM recipe_nvtx_gpu_proj

-- name: workspace_file
-- The workspace file of the connection (its in-memory name otherwise).
SELECT coalesce(path, database_name) FROM duckdb_databases()
WHERE database_name = current_database()
