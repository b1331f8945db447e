-- The statements of the rank store's Parquet entries (nsight_analyze/ingest/rank_store.py).

-- name: copy_to_parquet
-- One table's rows of a batch into its Parquet file of an entry ($path: a SQL literal).
COPY (SELECT * FROM "$table") TO $path (FORMAT parquet, COMPRESSION zstd)

-- name: parquet_columns
-- The columns of an entry's Parquet file.
DESCRIBE SELECT * FROM read_parquet($path)

-- name: file_id_when
-- One file's rows under the file_id the client gives it now ($old: the task's, $new: the client's).
WHEN $old THEN $new

-- name: renumbered_rows
-- Every column, the file_id renumbered by the file_id_whens ($whens).
* REPLACE (CASE file_id $whens ELSE file_id END AS file_id)

-- name: insert_parquet
-- An entry's Parquet rows appended to the workspace's table ($select: * or renumbered_rows).
INSERT INTO "$table" BY NAME SELECT $select FROM read_parquet($path)
