-- diag_step_causes: per step and idle cause, how much GPU time the worst rank lost.
-- Why: in synchronous data-parallel training the step is as long as its slowest rank, so the
-- wall time a fix can save in a step is bounded by the worst rank's loss, not by the sum.
-- Columns:
--   job INTEGER (ranks.job: steps of different jobs are never put together),
--   step BIGINT (NULL = whole capture, when the job has no steps),
--   cause VARCHAR: input_stall | sync_stall | launch (launch_gap + host_bound) | comms_exposed | idle,
--   step_ns BIGINT ns (longest window of the step over ranks), max_ns BIGINT ns (the worst rank's
--   time in this cause), worst_rank INTEGER, mean_ns DOUBLE ns (over ranks with a window),
--   share_pct DOUBLE % (100 * max_ns / step_ns), ranks INTEGER[] (ranks with a positive value),
--   n_ranks BIGINT (ranks with a window in the step).
-- Definition: diag_windows unpivoted; per job, step and cause: max, arg max (lowest rank on ties), mean.
-- columns: job, step, cause, step_ns, max_ns, worst_rank, mean_ns, share_pct, ranks, n_ranks
-- stage: job
-- result: stored
-- requires: diag_windows, ranks
CREATE OR REPLACE VIEW diag_step_causes AS
WITH u AS (
    UNPIVOT (
        SELECT d.rank, coalesce(r.job, 1) AS job, d.step, d.window_ns,
               d.input_stall_ns AS input_stall, d.sync_stall_ns AS sync_stall,
               d.launch_gap_ns + d.host_bound_ns AS launch, d.comms_exposed_ns AS comms_exposed,
               d.idle_ns AS idle
        FROM diag_windows AS d LEFT JOIN ranks AS r ON r.rank = d.rank
    ) ON input_stall, sync_stall, launch, comms_exposed, idle INTO NAME cause VALUE ns
)
SELECT job::INTEGER AS job, step, cause, max(window_ns) AS step_ns, max(ns) AS max_ns,
       arg_max(rank, ns::HUGEINT * 100000 - rank) AS worst_rank, avg(ns) AS mean_ns,
       100.0 * max(ns) / nullif(max(window_ns), 0) AS share_pct,
       coalesce(list(rank ORDER BY rank) FILTER (WHERE ns > 0), []) AS ranks,
       count(*) AS n_ranks
FROM u GROUP BY job, step, cause;
