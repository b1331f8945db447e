-- merge_imbalance_of(tbl): per job and step, compute imbalance across the job's ranks, from any per-rank partition.
-- Why: the `imbalance` view applies it to `time_partition`; as a macro the definition can
-- be tested (and reused on other partitions) with hand-made rows. Ranks of different jobs are
-- never compared: a rank's job is ranks.job (1 for a rank without one).
-- Input: table/view/CTE name (string) with columns rank, step (NULL = whole capture), compute_ns.
-- Columns:
--   job              INTEGER  see `jobs`
--   step             BIGINT   step number (NULL = whole capture)
--   ranks            BIGINT   ranks of the job with a window in this step
--   max_compute_ns   BIGINT   ns, largest per-rank compute time
--   mean_compute_ns  DOUBLE   ns, mean per-rank compute time
--   ratio            DOUBLE   max / mean (1 = perfectly balanced; NULL when mean is 0)
--   slowest_rank     INTEGER  rank with the largest compute time (lowest rank on ties)
--   wait_gpu_ns      BIGINT   GPU-ns the other ranks would wait for it at the next collective:
--                             sum over ranks of (max_compute_ns - compute_ns)
--   balanced         BOOLEAN  ratio < settings.imbalance_balanced_ratio (default 1.05)
-- stage: live
-- requires: ranks, settings
CREATE OR REPLACE MACRO merge_imbalance_of(tbl) AS TABLE
WITH src AS (
    SELECT s.rank, COALESCE(r.job, 1) AS job, s.step, s.compute_ns
    FROM query_table(tbl) AS s
    LEFT JOIN ranks AS r ON r.rank = s.rank
    WHERE s.compute_ns IS NOT NULL
),
g AS (
    SELECT
        job,
        step,
        COUNT(*) AS ranks,
        MAX(compute_ns) AS max_compute_ns,
        AVG(compute_ns) AS mean_compute_ns,
        ARG_MAX(rank, (compute_ns, -rank)) AS slowest_rank,
        COUNT(*) * MAX(compute_ns) - SUM(compute_ns) AS wait_gpu_ns
    FROM src
    GROUP BY job, step
)
SELECT
    job::INTEGER AS job, step, ranks, max_compute_ns::BIGINT AS max_compute_ns, mean_compute_ns,
    max_compute_ns / NULLIF(mean_compute_ns, 0) AS ratio,
    slowest_rank::INTEGER AS slowest_rank,
    wait_gpu_ns::BIGINT AS wait_gpu_ns,
    COALESCE(max_compute_ns / NULLIF(mean_compute_ns, 0), 1.0) < COALESCE(
        (SELECT TRY_CAST(value AS DOUBLE) FROM settings WHERE key = 'imbalance_balanced_ratio'), 1.05
    ) AS balanced
FROM g
ORDER BY job, step NULLS FIRST;
