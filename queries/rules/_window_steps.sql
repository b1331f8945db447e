-- The statements of the per-window step list (nsight_analyze/rules/_window_steps.py).

-- name: steps_over_threshold
-- Steps in which some rank's value (column t of $per_window's rows rank, step, t, window_ns) is
-- >= $th_pct of its window.
SELECT DISTINCT step FROM ($per_window)
WHERE step IS NOT NULL AND t > 0 AND 100.0 * t / nullif(window_ns, 0) >= $th_pct
ORDER BY step
