-- The statements of the files an ingest did not load (nsight_analyze/ingest/report.py).

-- name: forget_not_loaded
-- Earlier rows of files not loaded (status failed, skipped or ignored) under the paths seen
-- ($paths: a VARCHAR[] literal).
DELETE FROM files WHERE status <> 'ok' AND path IN (SELECT unnest($paths))

-- name: not_loaded_row
-- One file not loaded: $known (id, path, sha256, size, format), its status and the reason in
-- warnings ($message: a list literal).
($known, NULL, NULL, now(), $status, $message::VARCHAR[], [])

-- name: insert_files
-- Up to 1,000 not_loaded_rows in one statement.
INSERT INTO files VALUES $rows
