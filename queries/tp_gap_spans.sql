-- tp_gap_spans: the gaps of every window: maximal intervals of the window not covered by any GPU
-- operation of the rank.
-- Columns: rank INTEGER, step BIGINT (NULL = whole capture), w_end_ns BIGINT ns (window end),
--   g0, g1 BIGINT ns (the gap [g0, g1)).
-- Definition: consecutive idle segments (no operation of any category) of one window, merged.
CREATE OR REPLACE VIEW tp_gap_spans AS
WITH idle AS (
    SELECT rank, step, w_end_ns, start_ns, end_ns
    FROM tp_window_segments
    WHERE c = 0 AND m = 0 AND o = 0 AND n = 0
),
marked AS (
    SELECT *,
           CASE WHEN lag(end_ns) OVER (PARTITION BY rank, step ORDER BY start_ns) = start_ns THEN 0 ELSE 1 END
               AS new_gap
    FROM idle
),
grouped AS (
    SELECT *, sum(new_gap) OVER (PARTITION BY rank, step ORDER BY start_ns ROWS UNBOUNDED PRECEDING) AS gap_no
    FROM marked
)
SELECT rank, step, any_value(w_end_ns) AS w_end_ns, min(start_ns) AS g0, max(end_ns) AS g1
FROM grouped
GROUP BY rank, step, gap_no;
