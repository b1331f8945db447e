-- job_steps: one row per job and step: the job's step time and whether the step is steady.
-- Why: "the steady steps" is one definition read by summary's mean and median step, diagnose's
--   mean step, runs' step statistics, MFU's windows and the report's headline; each once wrote
--   its own copy of it. A step that holds one-time work (steps.one_time: a torch.compile
--   compilation, a CUDA/HIP graph capture or instantiation) on any rank is start-up cost paid
--   once, not the steady state (docs/metrics.md "Steps").
-- Columns:
--   job INTEGER               ranks.job
--   step BIGINT               steps.step (the whole-capture window, step NULL, has no row)
--   ranks BIGINT              ranks of the job with a window for the step
--   job_step_ns BIGINT ns     the step's longest window over those ranks (the slowest rank's)
--   one_time BOOLEAN          some rank's window of the step holds one-time work
--   steady BOOLEAN            the step counts in the steady state: NOT one_time, or every step of
--                             the job is one_time (then all count: there is no steady state to show)
-- columns: job, step, ranks, job_step_ns, one_time, steady
-- stage: job
-- result: stored
-- requires: steps, ranks
CREATE OR REPLACE VIEW job_steps AS
WITH per_step AS (
    SELECT r.job, s.step, count(*) AS ranks, max(s.end_ns - s.start_ns) AS job_step_ns,
           bool_or(s.one_time) AS one_time
    FROM steps AS s JOIN ranks AS r USING (rank)
    WHERE s.step IS NOT NULL
    GROUP BY r.job, s.step
)
SELECT *, NOT one_time OR bool_and(one_time) OVER (PARTITION BY job) AS steady
FROM per_step;
