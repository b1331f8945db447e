-- tp_segments: the GPU timeline of each rank cut into elementary segments, with how many
-- operations of each category run in each.
-- Why: one sweep (sort of the operation boundaries) yields every union the time partition needs
-- (C, C∪M, C∪M∪O, all, N) at once; step boundaries are cut points too, so each segment lies in
-- exactly one step window.
-- Columns: rank INTEGER, start_ns BIGINT ns, end_ns BIGINT ns (segment, positive length),
--   c, m, o, n INTEGER: number of compute / memory / other / comms operations covering it.
-- Definition: events are the starts (+1) and ends (-1) of the rank's positive-length GPU
--   operations per category, plus the capture and step window boundaries (0); counts are
--   running sums in time order; a segment runs from one distinct event time to the next.
--   Segments tile the whole-capture window exactly.
CREATE OR REPLACE VIEW tp_segments AS
WITH ops AS (
    SELECT rank, start_ns, end_ns,
           (category = 'compute')::INTEGER AS ic, (category = 'memory')::INTEGER AS im,
           (category = 'other')::INTEGER AS io, (category = 'comms')::INTEGER AS inn
    FROM gpu_ops
    WHERE end_ns > start_ns
),
ev AS (
    SELECT rank, start_ns AS ts, ic AS dc, im AS dm, io AS d_o, inn AS dn FROM ops
    UNION ALL
    SELECT rank, end_ns, -ic, -im, -io, -inn FROM ops
    UNION ALL
    SELECT rank, start_ns, 0, 0, 0, 0 FROM tp_capture
    UNION ALL
    SELECT rank, end_ns, 0, 0, 0, 0 FROM tp_capture
    UNION ALL
    SELECT rank, start_ns, 0, 0, 0, 0 FROM steps WHERE step IS NOT NULL
    UNION ALL
    SELECT rank, end_ns, 0, 0, 0, 0 FROM steps WHERE step IS NOT NULL
),
agg AS (
    SELECT rank, ts, sum(dc) AS dc, sum(dm) AS dm, sum(d_o) AS d_o, sum(dn) AS dn
    FROM ev
    GROUP BY rank, ts
),
run AS (
    SELECT
        rank,
        ts AS start_ns,
        lead(ts) OVER (PARTITION BY rank ORDER BY ts) AS end_ns,
        sum(dc) OVER w AS c, sum(dm) OVER w AS m, sum(d_o) OVER w AS o, sum(dn) OVER w AS n
    FROM agg
    WINDOW w AS (PARTITION BY rank ORDER BY ts ROWS UNBOUNDED PRECEDING)
)
SELECT rank, start_ns::BIGINT AS start_ns, end_ns::BIGINT AS end_ns,
       c::INTEGER AS c, m::INTEGER AS m, o::INTEGER AS o, n::INTEGER AS n
FROM run
WHERE end_ns IS NOT NULL;
