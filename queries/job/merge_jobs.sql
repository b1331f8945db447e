-- merge_jobs: which job each rank belongs to (the rule of docs/metrics.md "Jobs").
-- Why: a folder may hold captures of unrelated runs; ranks of different jobs must never be
-- matched, aligned or compared. The job step (nsight_analyze/ranks.py) copies `job` into
-- ranks.job before anything else of the job step reads it.
-- Rule, per file (the ranks of one file always share a job):
--   1. capture start = ranks.session_start_utc_ns (nsys: TARGET_INFO_SESSION_START_TIME); a
--      Kineto file has no session start of its own (its timestamps are wall-clock), so the wall
--      time of its first GPU operation (session_start_utc_ns + tp_capture.start_ns) stands for it
--      (unknown without GPU operations);
--   2. files sorted by capture start; a file starting more than settings.job_session_gap_s
--      (default 300 s) after the previous one starts a new time group. A file without a capture
--      start joins the time group when there is only one, else it is a job of its own;
--   3. inside a time group, files that name different world sizes are different jobs (a file
--      naming none takes the group's world size when the group names exactly one);
--   4. inside that, the k-th file naming a rank number (ranks.job_rank) goes to the k-th job, in
--      file order (file_id: the order of ingest, file names naturally sorted, so a folder's files
--      stay together; capture starts of jobs started together interleave by chance).
--   Jobs are numbered 1, 2, ... in the order of their lowest rank.
-- Columns:
--   rank INTEGER, file_id INTEGER
--   job INTEGER             1-based job id
--   job_rank INTEGER        the rank's number inside its job (ranks.job_rank, else rank)
--   capture_start_utc_ns BIGINT ns (UTC) of the file, see 1 (NULL when unknown)
--   time_group BIGINT, world_size INTEGER (the file's, or the one it took in 3), part BIGINT (the k of 4)
-- columns: rank, file_id, job, job_rank, capture_start_utc_ns, time_group, world_size, part
-- stage: job
-- result: stored
-- requires: files, ranks, settings, tp_capture
CREATE OR REPLACE VIEW merge_jobs AS
WITH mj_gap AS (
    SELECT CAST(COALESCE(
        (SELECT TRY_CAST(value AS DOUBLE) FROM settings WHERE key = 'job_session_gap_s'), 300) * 1e9 AS BIGINT)
        AS ns
),
mj_rank AS (
    SELECT
        r.rank, r.file_id, COALESCE(r.job_rank, r.rank) AS job_rank, r.world_size,
        CASE WHEN f.source_format = 'kineto-json' THEN r.session_start_utc_ns + c.start_ns
             ELSE r.session_start_utc_ns END AS start_ns
    FROM ranks AS r
    LEFT JOIN files AS f ON f.file_id = r.file_id
    LEFT JOIN tp_capture AS c ON c.rank = r.rank
),
mj_file AS (
    SELECT file_id, MIN(start_ns) AS start_ns, MAX(world_size) AS world_size
    FROM mj_rank GROUP BY file_id
),
mj_timed AS (
    SELECT file_id, start_ns,
           start_ns - LAG(start_ns) OVER (ORDER BY start_ns, file_id) AS since_previous
    FROM mj_file WHERE start_ns IS NOT NULL
),
mj_tgroup AS (
    SELECT file_id,
           SUM(CASE WHEN since_previous IS NULL OR since_previous > (SELECT ns FROM mj_gap) THEN 1 ELSE 0 END)
               OVER (ORDER BY start_ns, file_id ROWS UNBOUNDED PRECEDING) AS time_group
    FROM mj_timed
),
mj_placed AS (
    SELECT f.file_id, f.start_ns, f.world_size,
           CASE
               WHEN g.time_group IS NOT NULL THEN g.time_group
               WHEN (SELECT COUNT(DISTINCT time_group) FROM mj_tgroup) <= 1 THEN 1
               ELSE -f.file_id  -- no capture start among several time groups: a job of its own
           END AS time_group
    FROM mj_file AS f LEFT JOIN mj_tgroup AS g ON g.file_id = f.file_id
),
mj_sizes AS (
    SELECT time_group, COUNT(DISTINCT world_size) AS n, MAX(world_size) AS world_size
    FROM mj_placed GROUP BY time_group
),
mj_sized AS (
    SELECT p.file_id, p.start_ns, p.time_group,
           COALESCE(p.world_size, CASE WHEN s.n = 1 THEN s.world_size END) AS world_size
    FROM mj_placed AS p JOIN mj_sizes AS s ON s.time_group = p.time_group
),
mj_named AS (
    SELECT r.rank, r.file_id, r.job_rank, s.start_ns, s.time_group, s.world_size,
           ROW_NUMBER() OVER (
               PARTITION BY s.time_group, s.world_size, r.job_rank ORDER BY r.file_id, r.rank
           ) AS k
    FROM mj_rank AS r JOIN mj_sized AS s ON s.file_id = r.file_id
),
mj_part AS (
    SELECT *, MAX(k) OVER (PARTITION BY file_id) AS part FROM mj_named
),
mj_first AS (
    SELECT *, MIN(rank) OVER (PARTITION BY time_group, world_size, part) AS first_rank FROM mj_part
)
SELECT
    rank, file_id,
    DENSE_RANK() OVER (ORDER BY first_rank)::INTEGER AS job,
    job_rank::INTEGER AS job_rank,
    start_ns::BIGINT AS capture_start_utc_ns,
    time_group::BIGINT AS time_group,
    world_size::INTEGER AS world_size,
    part::BIGINT AS part
FROM mj_first;
