-- jobs: one row per job of the workspace: how many of its ranks are present.
-- Why: ranks of different jobs are never compared, and a partial job (fewer ranks present than
-- its world size) gets no collective waits or skew for collectives whose participants are
-- missing; `ranks`, `info` and the report say "2 of 128 ranks" from here.
-- Columns:
--   job INTEGER                  see merge_jobs
--   ranks BIGINT                 ranks present in the workspace
--   world_size INTEGER           ranks of the job its files name (Kineto distributedInfo, WORLD_SIZE-like
--                                variables, NCCL's init payload); NULL when none does
--   complete BOOLEAN             every rank of the job is present (ranks >= world_size; TRUE when the
--                                world size is unknown: the ranks present are taken as the whole job)
--   first_rank, last_rank INTEGER  lowest and highest rank (workspace numbers)
--   hosts BIGINT, files BIGINT   clock domains (hostname, else one per file) and files
--   capture_start_utc_ns BIGINT  ns (UTC), earliest capture start (merge_jobs), NULL when unknown
--   label VARCHAR                '2 of 128 ranks' | '8 ranks (world size unknown)'
-- columns: job, ranks, world_size, complete, first_rank, last_rank, hosts, files, capture_start_utc_ns, label
-- stage: job
-- result: stored
-- requires: merge_jobs, ranks
CREATE OR REPLACE VIEW jobs AS
WITH jb AS (
    SELECT
        j.job,
        COUNT(*) AS ranks,
        MAX(j.world_size)::INTEGER AS world_size,
        MIN(j.rank)::INTEGER AS first_rank,
        MAX(j.rank)::INTEGER AS last_rank,
        COUNT(DISTINCT COALESCE(r.hostname, 'file' || CAST(r.file_id AS VARCHAR))) AS hosts,
        COUNT(DISTINCT j.file_id) AS files,
        MIN(j.capture_start_utc_ns)::BIGINT AS capture_start_utc_ns
    FROM merge_jobs AS j
    JOIN ranks AS r ON r.rank = j.rank
    GROUP BY j.job
)
SELECT
    job, ranks, world_size,
    world_size IS NULL OR ranks >= world_size AS complete,
    first_rank, last_rank, hosts, files, capture_start_utc_ns,
    CASE
        WHEN world_size IS NULL THEN ranks || CASE WHEN ranks = 1 THEN ' rank' ELSE ' ranks' END
            || ' (world size unknown)'
        ELSE ranks || ' of ' || world_size || ' ranks'
    END AS label
FROM jb
ORDER BY job;
