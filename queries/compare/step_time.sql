-- The statements of compare's step times (nsight_analyze/compare/step_time.py).

-- name: step_windows
-- Per common rank, its step windows ($tp: the side's partition, e.g. before_tp); a rank without
-- steps has its capture as one window.
SELECT rank, step, window_ns FROM $tp t
WHERE rank IN (SELECT rank FROM cmp_common)
  AND (step IS NOT NULL OR NOT EXISTS (
        SELECT 1 FROM $tp u WHERE u.rank = t.rank AND u.step IS NOT NULL))
ORDER BY rank, step
