-- merge_rank_clock: each rank's job, clock domain and the two layers of its clock offset.
-- Why: ranks of one host share one clock (one refinement offset per host and job), and the
-- coarse UTC alignment must be recomputable from `ranks` alone, so that alignment is
-- idempotent and the refinement can be shown separately from the session-start shift.
-- Ranks of different jobs are never placed relative to each other: each job's time zero is
-- its own earliest session start.
-- Columns:
--   rank               INTEGER
--   job                INTEGER  ranks.job (set by the job step, see merge_jobs; 1 until it has run)
--   host               VARCHAR  clock domain: ranks.hostname, else 'file<file_id>' (one file = one clock)
--   session_offset_ns  BIGINT   ns; session start minus the job's earliest session start (0 when unknown)
--   clock_offset_ns    BIGINT   ns; the offset in use (ranks.clock_offset_ns, else session_offset_ns)
--   correction_ns      BIGINT   ns; clock_offset_ns - session_offset_ns = refinement from collectives
--   alignment_method   VARCHAR  session-start | collectives | none
-- columns: rank, job, host, session_offset_ns, clock_offset_ns, correction_ns, alignment_method
-- stage: live
-- requires: ranks
CREATE OR REPLACE VIEW merge_rank_clock AS
WITH base AS (
    SELECT
        rank,
        COALESCE(job, 1) AS job,
        COALESCE(hostname, 'file' || CAST(file_id AS VARCHAR)) AS host,
        (session_start_utc_ns - MIN(session_start_utc_ns) OVER (PARTITION BY COALESCE(job, 1)))::BIGINT
            AS raw_session_offset_ns,
        clock_offset_ns,
        alignment_method
    FROM ranks
)
SELECT
    rank,
    job::INTEGER AS job,
    host,
    COALESCE(raw_session_offset_ns, 0)::BIGINT AS session_offset_ns,
    COALESCE(clock_offset_ns, raw_session_offset_ns, 0)::BIGINT AS clock_offset_ns,
    (COALESCE(clock_offset_ns, raw_session_offset_ns, 0) - COALESCE(raw_session_offset_ns, 0))::BIGINT
        AS correction_ns,
    COALESCE(alignment_method, CASE WHEN raw_session_offset_ns IS NULL THEN 'none' ELSE 'session-start' END)
        AS alignment_method
FROM base;
