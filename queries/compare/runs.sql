-- The statements of compare's partition, step counts and imbalance (nsight_analyze/compare/runs.py).

-- name: partition_columns
-- The columns a side's stored partition has ($tp: e.g. before_tp): a workspace whose partition
-- predates the memory split lacks those.
DESCRIBE $tp

-- name: partition_means
-- Per common rank of one side ($tp), its number of windows and the mean of each partition column
-- it has ($present: their names, as a list) over its step windows (its capture when it has no
-- steps), into the temp table $part (e.g. before_part).
CREATE OR REPLACE TEMP TABLE "$part" AS
SELECT rank, count(*) AS windows, avg(COLUMNS($present))::DOUBLE
FROM $tp t
WHERE rank IN (SELECT rank FROM cmp_common)
  AND (step IS NOT NULL OR NOT EXISTS (
        SELECT 1 FROM $tp u WHERE u.rank = t.rank AND u.step IS NOT NULL))
GROUP BY rank

-- name: partition_unknown_column
-- A partition column $column the side's stored partition lacks: unknown there (NULL), never 0.
ALTER TABLE "$part" ADD COLUMN "$column" DOUBLE

-- name: partition_side_by_side
-- Per rank both sides have, BEFORE's means (b_<column>) beside AFTER's (a_<column>).
SELECT b.rank, COLUMNS(b.* EXCLUDE (rank, windows)) AS 'b_\0', COLUMNS(a.* EXCLUDE (rank, windows)) AS 'a_\0'
FROM before_part b JOIN after_part a USING (rank) ORDER BY rank

-- name: step_count
-- The most step windows a common rank of one side ($tp) has.
SELECT max(c) FROM (SELECT count(step) AS c FROM $tp
                    WHERE rank IN (SELECT rank FROM cmp_common) GROUP BY rank)

-- name: whole_capture_imbalance
-- The job-wide imbalance over the whole capture of one side ($imb: e.g. before_imb).
SELECT ratio, slowest_rank, balanced, wait_gpu_ns FROM $imb WHERE step IS NULL

-- name: rank_verdicts
-- Each rank's straggler verdict of one side ($rr: e.g. before_rr).
SELECT rank, verdict, straggler FROM $rr ORDER BY rank
