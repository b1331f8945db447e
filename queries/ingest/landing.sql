-- The statements of landing files' rows in the workspace (nsight_analyze/ingest/landing.py).

-- name: delete_rank_rows
-- The rows of $table that belong to the ranks given (?) and, $owned: what else they must match
-- (dcgm_rows_kept, file_rows_only or nothing).
DELETE FROM $table WHERE rank IN (SELECT unnest(?::INTEGER[])) $owned

-- name: dcgm_rows_kept
-- DCGM samples matched to these ranks belong to their own file (match_ranks re-matches them).
AND source IS DISTINCT FROM 'dcgm'

-- name: file_rows_only
-- Rows an input read beside these ranks owns (sources/base.py): only the file's own.
AND file_id = $file_id

-- name: delete_file_rows
-- The rows of $table a file owns by its file_id.
DELETE FROM $table WHERE file_id = ?

-- name: insert_file
-- A file loaded: $values (id, path, sha256, size, format, version, schema version), its
-- warnings and the tables it skipped.
INSERT INTO files VALUES ($values, now(), 'ok', $warnings::VARCHAR[], $skipped::VARCHAR[])

-- name: insert_run_labels
-- The run's labels (run_labels.py), one row per label.
INSERT INTO run_labels VALUES $rows
