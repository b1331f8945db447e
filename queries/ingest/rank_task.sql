-- The statements of a worker's tasks (nsight_analyze/ingest/rank_task.py).

-- name: store_setting
-- The client's settings (key, value, description) in the worker's database.
INSERT OR REPLACE INTO settings VALUES (?, ?, ?)

-- name: temp_views
-- The TEMP views a source left (dropped before the next task).
SELECT view_name FROM duckdb_views() WHERE NOT internal AND temporary

-- name: temp_tables
-- The TEMP tables a source left (dropped before the next task).
SELECT table_name FROM duckdb_tables() WHERE temporary

-- name: empty_table
DELETE FROM main."$table"

-- name: forget_rules_stamp
DELETE FROM meta WHERE key = 'classified_with'

-- name: insert_ranks
-- One `ranks` row per process of the file ($rows: their VALUES rows).
INSERT INTO ranks (rank, file_id, pid, global_pid, hostname, device_id, gpu_name, session_start_utc_ns, clock_offset_ns, rank_source, local_rank, world_size, alignment_method, job_rank) VALUES $rows

-- name: backwards_rows
-- The rows of $table (one of TIMED_TABLES) of the ranks $ranks that end before they start: their
-- count and the worst by how much (ns); the tables' selects are joined by UNION ALL.
SELECT '$table', count(*), max(start_ns - end_ns) FROM $table WHERE rank IN ($ranks) AND end_ns < start_ns
