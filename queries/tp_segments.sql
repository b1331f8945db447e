-- tp_segments: the GPU timeline of each rank cut into elementary segments, with how many
-- operations of each category run in each and the step window that holds it.
-- Why: one sweep (one sort of the operation boundaries) yields every union the time partition
-- needs (C, C∪M, C∪M∪O, all, N) at once; step boundaries are cut points too, so each segment lies
-- in exactly one step window, and the partition of every window is a plain GROUP BY.
-- Columns: rank INTEGER, step BIGINT (the step window holding the segment; NULL outside every
--   step window or when the rank has no steps), start_ns, end_ns BIGINT ns (positive length),
--   c, m, o, n INTEGER (number of compute / memory / other / comms operations covering it),
--   step_end_ns BIGINT ns (end of that step window), is_last BOOLEAN (ends at the capture end).
-- Definition: events are the starts (+1) and ends (-1) of the rank's GPU operations per category
--   (zero-length operations are events with delta 0: they cover nothing but bound the capture
--   window), plus the step-window boundaries (delta 0); counts are running sums in time order; a
--   segment runs from one distinct event time to the next. Segments tile the whole-capture window
--   [min start, max end) exactly.
CREATE OR REPLACE VIEW tp_segments AS
WITH ev AS (
    SELECT rank,
           unnest([start_ns, end_ns]) AS ts,
           unnest([1, -1]) * (CASE WHEN end_ns > start_ns THEN 1 ELSE 0 END) AS d,
           category
    FROM gpu_ops
    WHERE start_ns IS NOT NULL AND end_ns IS NOT NULL
    UNION ALL
    SELECT rank, unnest([start_ns, end_ns]) AS ts, 0 AS d, NULL AS category
    FROM steps
    WHERE step IS NOT NULL
),
agg AS (
    SELECT rank, ts,
           sum(CASE WHEN category = 'compute' THEN d ELSE 0 END) AS dc,
           sum(CASE WHEN category = 'memory' THEN d ELSE 0 END) AS dm,
           sum(CASE WHEN category = 'other' THEN d ELSE 0 END) AS d_o,
           sum(CASE WHEN category = 'comms' THEN d ELSE 0 END) AS dn
    FROM ev
    GROUP BY rank, ts
),
run AS (
    SELECT
        rank,
        ts AS start_ns,
        lead(ts) OVER wo AS end_ns,
        lead(ts, 2) OVER wo IS NULL AS is_last,
        sum(dc) OVER w AS c, sum(dm) OVER w AS m, sum(d_o) OVER w AS o, sum(dn) OVER w AS n
    FROM agg
    WINDOW wo AS (PARTITION BY rank ORDER BY ts),
           w AS (PARTITION BY rank ORDER BY ts ROWS UNBOUNDED PRECEDING)
)
SELECT s.rank,
       CASE WHEN s.start_ns < w.end_ns THEN w.step END AS step,
       s.start_ns::BIGINT AS start_ns, s.end_ns::BIGINT AS end_ns,
       s.c::INTEGER AS c, s.m::INTEGER AS m, s.o::INTEGER AS o, s.n::INTEGER AS n,
       CASE WHEN s.start_ns < w.end_ns THEN w.end_ns END AS step_end_ns,
       s.is_last
FROM run AS s
ASOF LEFT JOIN (SELECT rank, step, start_ns, end_ns FROM steps WHERE step IS NOT NULL) AS w
    ON w.rank = s.rank AND s.start_ns >= w.start_ns
WHERE s.end_ns IS NOT NULL;
