-- The statements of the Parquet export (nsight_analyze/export/parquet.py).

-- name: present_objects
-- Tables and views the connection resolves by plain name (TEMP shadows included: a workspace
-- computed for this session only has its results there).
SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'
UNION SELECT view_name FROM duckdb_views() WHERE NOT internal AND schema_name = 'main'

-- name: object_columns
-- The columns (name, DuckDB type) of table or view $object.
DESCRIBE SELECT * FROM "$object"

-- name: all_rows
SELECT * FROM "$object"

-- name: rows_of_ranks
-- Only the rows of the selected ranks ($ranks: their numbers, or NULL when none).
SELECT * FROM "$object" WHERE rank IN ($ranks)

-- name: copy_to_parquet
-- The rows of $query into the file $path (its text inside the quotes: sql_path), streamed by DuckDB.
COPY ($query) TO '$path' (FORMAT parquet, COMPRESSION zstd)
