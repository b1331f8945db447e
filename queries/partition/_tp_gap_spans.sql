-- _tp_gap_spans: the gaps of every window: maximal intervals of the window not covered by any GPU
-- operation of the rank.
-- Why: idle time is attributed per gap (what the host did during it), so the partition's idle
--   segments are first joined into the gaps they belong to.
-- Columns: rank INTEGER, step BIGINT (NULL = the whole-capture window), g0, g1 BIGINT ns (the gap
--   [g0, g1)), at_window_end BOOLEAN (g1 is the window's end).
-- Definition: idle segments of _tp_segments (no operation of any category), merged when
--   consecutive: across step boundaries for the whole-capture window, within one step window for
--   the step rows. One sort (lag/lead over the idle segments) marks each segment first / last of
--   its gap; a gap of one segment is both, and only the few gaps of several segments (split by a
--   step boundary or a zero-length operation) need a second, small window to pair first with last.
-- stage: rank
-- result: step
-- requires: _tp_segments, tp_capture
CREATE OR REPLACE VIEW _tp_gap_spans AS
WITH idle AS (
    SELECT rank, step, start_ns, end_ns, step_end_ns,
           lag(end_ns) OVER w IS DISTINCT FROM start_ns AS cap_first,
           lead(start_ns) OVER w IS DISTINCT FROM end_ns AS cap_last,
           lag(step) OVER w IS DISTINCT FROM step AS step_starts,
           lead(step) OVER w IS DISTINCT FROM step AS step_ends
    FROM _tp_segments
    WHERE c = 0 AND m = 0 AND o = 0 AND n = 0
    WINDOW w AS (PARTITION BY rank ORDER BY start_ns)
),
bounds AS (
    SELECT rank, NULL::BIGINT AS step, start_ns, end_ns, NULL::BIGINT AS step_end_ns,
           cap_first AS first, cap_last AS last
    FROM idle
    WHERE cap_first OR cap_last
    UNION ALL
    SELECT rank, step, start_ns, end_ns, step_end_ns, cap_first OR step_starts, cap_last OR step_ends
    FROM idle
    WHERE step IS NOT NULL AND (cap_first OR cap_last OR step_starts OR step_ends)
),
spans AS (
    SELECT rank, step, start_ns AS g0, end_ns AS g1, step_end_ns
    FROM bounds
    WHERE first AND last
    UNION ALL
    SELECT rank, step, g0, g1, step_end_ns
    FROM (
        SELECT rank, step, first, start_ns AS g0, step_end_ns,
               lead(end_ns) OVER (PARTITION BY rank, step ORDER BY start_ns) AS g1
        FROM bounds
        WHERE first <> last
    )
    WHERE first
)
SELECT s.rank, s.step, s.g0::BIGINT AS g0, s.g1::BIGINT AS g1,
       CASE WHEN s.step IS NULL THEN s.g1 = c.end_ns ELSE s.g1 = s.step_end_ns END AS at_window_end
FROM spans AS s
JOIN tp_capture AS c USING (rank);
