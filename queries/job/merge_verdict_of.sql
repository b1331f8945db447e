-- merge_verdict_of(imb): one row per job, the job's imbalance verdict and its straggler's cost.
-- Input: table/view/CTE name (string) with the columns of `imbalance`.
-- Why: a slowest rank exists in every step by definition; only a step spread above the
-- threshold, dominated by one rank, justifies calling that rank a straggler. Jobs are judged
-- apart: a rank is only ever compared with the ranks of its own job.
-- Definition, per job (thresholds in `settings`, defaults in brackets):
--   steps used: rows of `imbalance` with a step number and >= 2 ranks (the whole-capture
--   row when there are no steps). A step is imbalanced when NOT balanced (ratio >=
--   imbalance_balanced_ratio [1.05]).
--   verdict = 'unknown'    no step with >= 2 ranks;
--             'balanced'   median ratio over steps < imbalance_balanced_ratio;
--             'persistent' one rank is the slowest in more than straggler_persistent_share [0.5]
--                          of the imbalanced steps;
--             'rotating'   otherwise.
-- Columns:
--   job INTEGER (NULL only in the one 'unknown' row of an empty input);
--   verdict VARCHAR; steps BIGINT; imbalanced_steps BIGINT; median_ratio DOUBLE;
--   top_rank INTEGER (most often slowest among imbalanced steps), top_share DOUBLE (0..1);
--   straggler_rank INTEGER (top_rank when persistent, else NULL);
--   straggler_delay_ns BIGINT ns: sum over the steps where straggler_rank is slowest of
--     (its compute - mean compute of the other ranks) = wall time the job loses to it;
--   straggler_cost_ns BIGINT GPU-ns: sum of wait_gpu_ns over the same steps = the time the other
--     ranks lose to it (checked against a counterfactual simulation without the straggler).
-- stage: job
-- requires: steps, ranks, settings
CREATE OR REPLACE MACRO merge_verdict_of(imb) AS TABLE
WITH mv_all AS (
    SELECT * FROM query_table(imb)
),
mv_jobs AS (
    SELECT DISTINCT job FROM mv_all
    UNION ALL
    SELECT NULL WHERE NOT EXISTS (SELECT 1 FROM mv_all)
),
mv_stepped AS (
    SELECT * FROM mv_all WHERE step IS NOT NULL AND ranks >= 2
),
mv_used AS (
    SELECT * FROM mv_stepped
    UNION ALL
    SELECT * FROM mv_all AS a
    WHERE a.step IS NULL AND a.ranks >= 2
      AND NOT EXISTS (SELECT 1 FROM mv_stepped AS s WHERE s.job IS NOT DISTINCT FROM a.job)
),
mv_thresholds AS (
    SELECT
        COALESCE((SELECT TRY_CAST(value AS DOUBLE) FROM settings WHERE key = 'imbalance_balanced_ratio'), 1.05)
            AS balanced_ratio,
        COALESCE((SELECT TRY_CAST(value AS DOUBLE) FROM settings WHERE key = 'straggler_persistent_share'), 0.5)
            AS persistent_share
),
mv_summary AS (
    SELECT
        j.job,
        COUNT(u.job) AS steps,
        COUNT(u.job) FILTER (WHERE NOT u.balanced) AS imbalanced_steps,
        MEDIAN(u.ratio) AS median_ratio
    FROM mv_jobs AS j
    LEFT JOIN mv_used AS u ON u.job IS NOT DISTINCT FROM j.job
    GROUP BY j.job
),
mv_top AS (
    SELECT job, slowest_rank AS top_rank, n
    FROM (
        SELECT job, slowest_rank, COUNT(*) AS n,
               ROW_NUMBER() OVER (PARTITION BY job ORDER BY COUNT(*) DESC, slowest_rank) AS pick
        FROM mv_used WHERE NOT balanced
        GROUP BY job, slowest_rank
    )
    WHERE pick = 1
),
mv_verdict AS (
    SELECT
        s.job, s.steps, s.imbalanced_steps, s.median_ratio, mv_top.top_rank,
        mv_top.n / NULLIF(s.imbalanced_steps, 0) AS top_share,
        CASE
            WHEN s.steps = 0 THEN 'unknown'
            WHEN s.median_ratio < t.balanced_ratio THEN 'balanced'
            WHEN mv_top.n > t.persistent_share * s.imbalanced_steps THEN 'persistent'
            ELSE 'rotating'
        END AS verdict
    FROM mv_summary AS s CROSS JOIN mv_thresholds AS t
    LEFT JOIN mv_top ON mv_top.job IS NOT DISTINCT FROM s.job
),
mv_cost AS (
    SELECT
        v.job,
        SUM(u.max_compute_ns - (u.ranks * u.mean_compute_ns - u.max_compute_ns) / (u.ranks - 1)) AS delay,
        SUM(u.wait_gpu_ns) AS wait_gpu
    FROM mv_used AS u
    JOIN mv_verdict AS v ON v.job IS NOT DISTINCT FROM u.job
    WHERE v.verdict = 'persistent' AND u.slowest_rank = v.top_rank
    GROUP BY v.job
)
SELECT
    v.job::INTEGER AS job, v.verdict, v.steps, v.imbalanced_steps, v.median_ratio,
    v.top_rank::INTEGER AS top_rank, v.top_share,
    CASE WHEN v.verdict = 'persistent' THEN v.top_rank END::INTEGER AS straggler_rank,
    CAST(ROUND(c.delay) AS BIGINT) AS straggler_delay_ns,
    c.wait_gpu::BIGINT AS straggler_cost_ns
FROM mv_verdict AS v
LEFT JOIN mv_cost AS c ON c.job IS NOT DISTINCT FROM v.job
ORDER BY v.job NULLS FIRST;
