-- rank_coll_ready: per NCCL kernel, when the rank's own work let it start, and whether work waited for it.
-- Why: the what-if replay (whatif) needs, for each collective, the moment the rank was ready
-- apart from waiting for its NCCL stream (the end of the GPU work launched before it), and whether
-- the rank's next work had to wait for the collective to end (its GPU idled until then).
-- Columns: rank INTEGER, correlation_id BIGINT, start_ns BIGINT ns, end_ns BIGINT ns (the kernel,
--   file time), ready_ns BIGINT ns (file time; NULL when no earlier work is known),
--   resume_ns BIGINT ns (start of the first non-communication operation at or after end_ns; NULL if
--   none), waits BOOLEAN (work waited for it: resume_ns - end_ns <= 5 µs and no non-communication
--   operation was running at end_ns).
-- Definition: ready_ns = max end of the rank's non-communication GPU operations (gpu_ops) whose
--   correlation id is smaller than the NCCL kernel's (launched before it, CUPTI ids grow in launch
--   order); NCCL kernels are those of nccl_kernels.
-- columns: rank, correlation_id, start_ns, end_ns, ready_ns, resume_ns, waits
-- stage: rank
-- result: stored
-- requires: gpu_ops, nccl_kernels
CREATE OR REPLACE VIEW rank_coll_ready AS
-- The NCCL kernels merged into two sorts of the rank's operations (by correlation id, by time),
-- each read by running windows; at equal keys the NCCL kernel sorts first, so "before" is strict
-- and operations that start at the same time all count. (Three ASOF joins took as long, and
-- picked one of several operations starting at the same time: run_end depended on which.)
WITH by_corr AS (
    SELECT rank, correlation_id, end_ns AS e, NULL::BIGINT AS start_ns, NULL::BIGINT AS end_ns,
           false AS is_n
    FROM gpu_ops
    WHERE category IS DISTINCT FROM 'comms' AND correlation_id IS NOT NULL
    UNION ALL
    SELECT rank, correlation_id, NULL, start_ns, end_ns, true FROM nccl_kernels
),
ready AS (
    SELECT rank, correlation_id, start_ns, end_ns,
           CASE WHEN correlation_id IS NOT NULL THEN ready_ns END AS ready_ns  -- no id: not known
    FROM (SELECT *, max(e) OVER (PARTITION BY rank ORDER BY correlation_id, is_n DESC
                                 ROWS UNBOUNDED PRECEDING) AS ready_ns
          FROM by_corr)
    WHERE is_n
),
by_time AS (
    SELECT rank, start_ns AS t, end_ns AS e, NULL::BIGINT AS correlation_id, NULL::BIGINT AS start_ns,
           NULL::BIGINT AS ready_ns, false AS is_n
    FROM gpu_ops
    WHERE category IS DISTINCT FROM 'comms'
    UNION ALL
    SELECT rank, end_ns, NULL, correlation_id, start_ns, ready_ns, true FROM ready
),
around AS (
    SELECT *,
           max(e) OVER (w ROWS UNBOUNDED PRECEDING) AS run_end,
           first_value(CASE WHEN NOT is_n THEN t END IGNORE NULLS)
               OVER (w ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS resume_ns
    FROM by_time
    WINDOW w AS (PARTITION BY rank ORDER BY t, is_n DESC)
)
SELECT rank, correlation_id, start_ns, t AS end_ns, ready_ns, resume_ns,
       coalesce(resume_ns - t <= 5000 AND coalesce(run_end, 0) <= t, FALSE) AS waits
FROM around
WHERE is_n;
