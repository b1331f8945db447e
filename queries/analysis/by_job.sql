-- The statements of the job-level step of new runs alone (nsight_analyze/analysis/by_job.py).

-- name: every_rank_table
-- A numbered job result ($name: merge_jobs, jobs) over every rank, kept as a TEMP table
-- ($every: by_job's prefix) and then read as computed.
CREATE OR REPLACE TEMP TABLE "$every$name" AS SELECT * FROM temp.main."$name"

-- name: all_rows_view
-- A TEMP view named $name of every row of $source.
CREATE OR REPLACE TEMP VIEW "$name" AS SELECT * FROM $source

-- name: ranks_view
-- A TEMP view named $name of the rows of the ranks $ranks (an IN-list) of $source.
CREATE OR REPLACE TEMP VIEW "$name" AS SELECT * FROM $source WHERE rank IN ($ranks)

-- name: jobs_view
-- A TEMP view named $name of the rows of the jobs $jobs (an IN-list) of $source.
CREATE OR REPLACE TEMP VIEW "$name" AS SELECT * FROM $source WHERE job IN ($jobs)

-- name: joined_job
-- The first job held that a new rank ($new: the new ranks) joins, NULL when none.
SELECT min(job) FROM ${every}merge_jobs WHERE rank IN ($new)
AND job IN (SELECT job FROM ${every}merge_jobs WHERE rank NOT IN ($new))

-- name: held_ranks
-- The held ranks' rows of merge_jobs.
rank NOT IN ($new)

-- name: held_jobs
-- The held ranks' jobs' rows of jobs.
job IN (SELECT job FROM ${every}merge_jobs WHERE rank NOT IN ($new))

-- name: held_rows_now
-- The $columns of the held rows ($where: held_ranks or held_jobs) of a numbered result computed
-- over every rank.
SELECT $columns FROM $every$name WHERE $where

-- name: held_rows_changed
-- The rows that differ between those held now ($now: held_rows_now) and the stored ones ($stored).
SELECT count(*) FROM (($now EXCEPT ALL SELECT $columns FROM $stored)
UNION ALL (SELECT $columns FROM $stored EXCEPT ALL $now))

-- name: collectives_held
-- How many collectives are held, and the highest coll_id (the new jobs' ids follow it).
SELECT count(*), coalesce(max(coll_id), 0) FROM $main.collectives

-- name: new_jobs
-- The jobs the new ranks form.
SELECT DISTINCT job FROM ${every}merge_jobs WHERE rank IN ($new) ORDER BY 1

-- name: new_ranks_table
-- The new ranks' rows of `ranks`, as the TEMP table the alignment writes their offsets to.
CREATE OR REPLACE TEMP TABLE ranks AS SELECT * FROM $main.ranks WHERE rank IN ($new)

-- name: shift_coll_ids
-- The new jobs' collective ids, after the $collectives held.
UPDATE temp.main."$name" SET coll_id = coll_id + $collectives
