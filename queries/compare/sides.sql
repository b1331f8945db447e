-- The statements of compare's two sides (nsight_analyze/compare/sides.py).

-- name: periodic_ranks
-- How many ranks have their steps from a periodic kernel (settings.periodic_steps = 'on').
SELECT count(DISTINCT rank) FROM steps WHERE source = 'periodic'

-- name: job_files
-- The files of job ? (bound): what a side's workspace of that one job is ingested from.
SELECT DISTINCT f.path FROM files f JOIN ranks r USING (file_id) WHERE r.job = ? ORDER BY 1

-- name: periodic_steps_off
UPDATE settings SET value = 'off' WHERE key = 'periodic_steps'

-- name: side_view
-- A temp view $view (e.g. before_tp) over one side's stored result ($select: one of the three
-- statements below).
CREATE OR REPLACE TEMP VIEW "$view" AS $select

-- name: side_stored_result
-- A stored result ($table: the side's catalog prefix and its name) as it is.
SELECT * FROM $table

-- name: side_step_sources
-- Per rank, where its steps come from and how many it has ($steps: the side's steps).
SELECT rank, min(source) AS source, count(*) AS windows FROM $steps GROUP BY rank

-- name: side_step_spans
-- Per rank, the span of its steps ($steps: the side's steps).
SELECT rank, min(start_ns) AS lo, max(end_ns) AS hi FROM $steps GROUP BY rank

-- name: use_catalog
USE "$catalog"
