-- The statements of the analysis' orchestration and swap (nsight_analyze/analysis/__init__.py).

-- name: stale_rank_rows
-- The rows of a rank result that the stale ranks $ranks (an IN-list) own: replaced in the swap.
rank IN ($ranks)

-- name: delete_rows
-- A stored result's rows that its staged rows replace ($where: stale_rank_rows, or the new jobs'
-- rows: plan.NewJobs.where).
DELETE FROM $table WHERE $where

-- name: append_staged
-- The staged rows of a result appended to the stored table, by column name.
INSERT INTO $table BY NAME SELECT * FROM $staged

-- name: update_aligned_ranks
-- What the job step sets in `ranks` (the job, the clock alignment: staged_clocks' columns) written
-- back from its staged copy ($staged).
UPDATE $main.ranks SET job = s.job, clock_offset_ns = s.clock_offset_ns, alignment_method = s.alignment_method
FROM $staged s WHERE s.rank = ranks.rank

-- name: create_rank_state
-- The per-rank stamps: each rank's fingerprint, row counts and events.
CREATE OR REPLACE TABLE $state (rank INTEGER PRIMARY KEY, fingerprint TEXT, counts TEXT, events BIGINT)

-- name: insert_rank_state
INSERT INTO $state VALUES $rows

-- name: stamp_meta
-- The stamps and the results held ($rows: the VALUES rows) stored in `meta`.
INSERT OR REPLACE INTO meta VALUES $rows

-- name: rename_table
-- A staged (or early) table renamed to its place ($table: qualified; $to: the new name).
ALTER TABLE $table RENAME TO "$to"

-- name: empty_copy
-- An empty table typed as $source (the staged table of a result when some ranks are kept).
CREATE TABLE $table AS SELECT * FROM $source LIMIT 0

-- name: staged_rows
SELECT * FROM $staged

-- name: kept_and_staged_rows
-- The kept ranks' stored rows (the stale ranks $ranks filtered out) with the staged rows
-- ($staged_rows: staged_rows).
SELECT * FROM $stored WHERE rank NOT IN ($ranks) UNION ALL $staged_rows

-- name: stored_and_staged_rows
-- The stored rows with the staged rows, when no rank is stale (the job's files changed).
SELECT * FROM $stored UNION ALL $staged_rows

-- name: temp_view
-- A TEMP view named $name of $rows, what the job step reads under the result's own name.
CREATE OR REPLACE TEMP VIEW "$name" AS $rows

-- name: copy_ranks
-- A private copy of `ranks` the job step aligns the clocks in (written back by the swap).
CREATE OR REPLACE TEMP TABLE ranks AS SELECT * FROM $main.ranks

-- name: table_copy
-- A TEMP result of the job step copied into its staged table.
CREATE TABLE $table AS SELECT * FROM $source

-- name: staged_clocks
-- What the job step sets in `ranks` (the job, the clock alignment), staged for the swap.
CREATE TABLE $table AS SELECT rank, job, clock_offset_ns, alignment_method FROM temp.main.ranks

-- name: append_early
-- The early results of the ranks $ranks appended to the staged table.
INSERT INTO $table BY NAME SELECT * FROM $early WHERE rank IN ($ranks)

-- name: append_parquet
-- The workers' rank-local results of the ranks $ranks (their Parquet files: the parameter)
-- appended to the staged table.
INSERT INTO $table BY NAME SELECT * FROM read_parquet(?::VARCHAR[]) WHERE rank IN ($ranks)
