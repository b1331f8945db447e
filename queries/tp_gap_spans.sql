-- tp_gap_spans: the gaps of every window: maximal intervals of the window not covered by any GPU
-- operation of the rank.
-- Columns: rank INTEGER, step BIGINT (NULL = the whole-capture window), g0, g1 BIGINT ns (the gap
--   [g0, g1)), at_window_end BOOLEAN (g1 is the window's end).
-- Definition: idle segments of tp_segments (no operation of any category), merged when
--   consecutive: across step boundaries for the whole-capture window, within one step window for
--   the step rows. One sort serves both (GROUPING SETS).
CREATE OR REPLACE VIEW tp_gap_spans AS
WITH idle AS (
    SELECT rank, step, start_ns, end_ns, step_end_ns,
           lag(end_ns) OVER w AS prev_end, lag(step) OVER w AS prev_step
    FROM tp_segments
    WHERE c = 0 AND m = 0 AND o = 0 AND n = 0
    WINDOW w AS (PARTITION BY rank ORDER BY start_ns)
),
ids AS (
    SELECT *,
           sum(CASE WHEN prev_end = start_ns THEN 0 ELSE 1 END) OVER w AS cap_gap,
           sum(CASE WHEN prev_end = start_ns AND step IS NOT DISTINCT FROM prev_step THEN 0 ELSE 1 END) OVER w
               AS step_gap
    FROM idle
    WINDOW w AS (PARTITION BY rank ORDER BY start_ns ROWS UNBOUNDED PRECEDING)
),
grouped AS (
    SELECT rank, step, GROUPING(step_gap) AS whole,
           min(start_ns) AS g0, max(end_ns) AS g1, max(step_end_ns) AS step_end
    FROM ids
    GROUP BY GROUPING SETS ((rank, cap_gap), (rank, step, step_gap))
)
SELECT g.rank,
       CASE WHEN g.whole = 1 THEN NULL ELSE g.step END AS step,
       g.g0::BIGINT AS g0, g.g1::BIGINT AS g1,
       CASE WHEN g.whole = 1 THEN g.g1 = c.end_ns ELSE g.g1 = g.step_end END AS at_window_end
FROM grouped AS g
JOIN tp_capture AS c USING (rank)
WHERE g.whole = 1 OR g.step IS NOT NULL;
