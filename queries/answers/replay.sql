-- The statements of the what-if replay's recurrence (nsight_analyze/replay.py).

-- name: replay_groups
-- Per job and scenario of $inputs (_whatif_inputs): its rows and ranks.
SELECT job, scenario, count(*), count(DISTINCT rank) FROM $inputs GROUP BY ALL ORDER BY ALL

-- name: replay_events
-- One job's ($job) and scenario's ($scenario, a SQL literal) inputs, in event and rank order:
-- the step and $columns (the recurrence's columns).
SELECT step, $columns FROM $inputs
WHERE job = $job AND scenario = $scenario ORDER BY ev, rank

-- name: create_replayed
-- The replayed step times ($table: _whatif_replayed).
CREATE OR REPLACE TEMP TABLE $table (job INTEGER, scenario VARCHAR, step BIGINT, step_ns BIGINT)

-- name: insert_replayed
-- The replayed rows as literals ($rows: duck.sql_rows).
INSERT INTO $table VALUES $rows
