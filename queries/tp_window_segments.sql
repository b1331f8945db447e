-- tp_window_segments: tp_segments assigned to their windows: every segment once for the whole
-- capture (step NULL) and once more for the step window that holds it, if any.
-- Why: the partition and the gaps are computed per window; the whole-capture row is computed over
-- its own window, not summed from the steps (docs/metrics.md).
-- Columns: rank INTEGER, step BIGINT (NULL = whole capture), w_start_ns, w_end_ns BIGINT ns (the
--   window), start_ns, end_ns BIGINT ns (the segment), c, m, o, n INTEGER (as tp_segments).
-- Definition: step windows of a rank are disjoint and their boundaries are segment cut points, so
--   a segment belongs to the step window with the last start <= segment start, if it ends there.
CREATE OR REPLACE VIEW tp_window_segments AS
SELECT s.rank, NULL::BIGINT AS step, c.start_ns AS w_start_ns, c.end_ns AS w_end_ns,
       s.start_ns, s.end_ns, s.c, s.m, s.o, s.n
FROM tp_segments AS s
JOIN tp_capture AS c USING (rank)
UNION ALL
SELECT s.rank, w.step, w.start_ns AS w_start_ns, w.end_ns AS w_end_ns,
       s.start_ns, s.end_ns, s.c, s.m, s.o, s.n
FROM tp_segments AS s
ASOF JOIN (SELECT rank, step, start_ns, end_ns FROM steps WHERE step IS NOT NULL) AS w
    ON w.rank = s.rank AND w.start_ns <= s.start_ns
WHERE s.start_ns < w.end_ns;
