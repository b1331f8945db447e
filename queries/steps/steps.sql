-- steps: the step windows of every rank, projected onto the GPU timeline.
-- Why: per-step partitions need windows that tile the GPU timeline, with the idle time before a
-- step's first kernel (input wait, host work) belonging to that step.
-- Columns: rank INTEGER, step BIGINT (NULL = the whole capture is one window),
--   start_ns BIGINT ns, end_ns BIGINT ns (half-open window), source VARCHAR:
--   'nvtx' (NVTX ranges matching settings.step_pattern), 'detected' (optimizer bursts, see
--   _tp_detected_steps), 'periodic' (the runs of a kernel that repeats once per step, ibid.;
--   unless settings.periodic_steps = 'off'; on by default), 'graph replay' / 'annotation' (a
--   detected step whose end moved to the end of one launch call's GPU work or of one annotation's,
--   merging the detected steps inside it: _tp_detected_steps "Indivisible work"; from the periodic
--   detector only while it is on) or 'capture' (none of these: one window over the whole capture,
--   step NULL), one_time BOOLEAN (the step holds one-time work: a torch.compile compilation or a
--   CUDA/HIP graph capture or instantiation, capture_phases; FALSE for the whole-capture window).
-- Definition (docs/metrics.md "Windows"): for NVTX steps, E_N / F_N = max end / min start of the
--   operations belonging to step N (tp_step_ops), E'_N = running max of E_N in step order; step N's
--   window is [E'_{N-1}, E'_N), the first step's [F_first, E'_first). Empty windows and steps
--   without GPU operations have no row. A rank uses the first source that gives it a window, in
--   the order nvtx, detected, periodic, capture. Ranks without GPU operations have no row.
--   one_time: a capture_phases phase [start_ns, end_ns] (host time) of the rank overlaps the step's
--   window or the idle before it: p.start_ns < window end and p.end_ns > the previous step's window
--   end (no lower bound for the rank's first step: a compilation before the first kernel is that
--   step's). Such a step is start-up work paid once, not the steady state: summary's mean and
--   median step leave it out (docs/metrics.md "Steps").
-- columns: rank, step, start_ns, end_ns, source, one_time
-- stage: rank
-- result: stored
-- requires: _tp_detected_steps, tp_capture, tp_step_ops, nvtx, capture_phases
CREATE OR REPLACE VIEW steps AS
WITH per_step AS (
    SELECT rank, step, min(start_ns) AS f, max(end_ns) AS e
    FROM tp_step_ops
    GROUP BY rank, step
),
running AS (
    SELECT rank, step, f,
           max(e) OVER (PARTITION BY rank ORDER BY step ROWS UNBOUNDED PRECEDING) AS e_run
    FROM per_step
),
nvtx_windows AS (
    SELECT rank, step,
           coalesce(lag(e_run) OVER (PARTITION BY rank ORDER BY step), f) AS start_ns,
           e_run AS end_ns
    FROM running
),
candidates AS (
    SELECT rank, step, start_ns, end_ns, 'nvtx' AS source, 1 AS priority
    FROM nvtx_windows
    WHERE end_ns > start_ns
    UNION ALL
    SELECT rank, step, start_ns, end_ns, CASE method WHEN 'optimizer' THEN 'detected' ELSE method END, 2
    FROM _tp_detected_steps
    WHERE detector = 'optimizer'
       OR coalesce((SELECT value FROM settings WHERE key = 'periodic_steps'), 'on') <> 'off'
    UNION ALL
    SELECT rank, NULL::BIGINT, start_ns, end_ns, 'capture', 3 FROM tp_capture
),
chosen AS (
    SELECT rank, step, start_ns::BIGINT AS start_ns, end_ns::BIGINT AS end_ns, source
    FROM candidates
    QUALIFY priority = min(priority) OVER (PARTITION BY rank)
)
SELECT c.rank, c.step, c.start_ns, c.end_ns, c.source,
       c.step IS NOT NULL AND EXISTS (
           SELECT 1 FROM capture_phases AS p
           WHERE p.rank = c.rank AND p.start_ns < c.end_ns
             AND (c.prev_end_ns IS NULL OR p.end_ns > c.prev_end_ns)) AS one_time
FROM (SELECT *, lag(end_ns) OVER (PARTITION BY rank ORDER BY step) AS prev_end_ns FROM chosen) AS c;
