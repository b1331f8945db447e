-- diag_window_bounds: start and end of every diag_windows window (the job's steps, or the capture).
-- Why: rules that work on events (copies, gaps, kernels) must count only what falls inside the
-- windows their per-step numbers are divided by.
-- Columns: rank INTEGER, step BIGINT (NULL = whole capture), start_ns BIGINT ns, end_ns BIGINT ns
--   (half-open window on the rank's file timeline).
-- Definition: `steps` rows (and tp_capture for the whole capture) of the (rank, step) pairs in
--   diag_windows.
-- columns: rank, step, start_ns, end_ns
-- stage: job
-- result: stored
-- requires: diag_windows, steps, tp_capture
CREATE OR REPLACE VIEW diag_window_bounds AS
SELECT DISTINCT d.rank, d.step, s.start_ns, s.end_ns
FROM diag_windows d
JOIN (SELECT rank, step, start_ns, end_ns FROM steps WHERE step IS NOT NULL
      UNION ALL SELECT rank, NULL, start_ns, end_ns FROM tp_capture) s
  ON s.rank = d.rank AND s.step IS NOT DISTINCT FROM d.step;
