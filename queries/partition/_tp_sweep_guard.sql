-- _tp_sweep_guard: ranks whose sweep miscounted because too many operations overlapped.
-- Why: _tp_segments packs five operation counters of 15 bits each (the fifth: copies among the
--   memory operations) into one running sum, so it is
--   exact only while fewer than 32768 operations of one category overlap on one rank. The
--   analysis stops with a clear error when this returns a row, instead of answering wrongly.
-- Columns: rank INTEGER, category VARCHAR, swept_ns HUGEINT (sum over segments of the category's
--   count x length), busy_ns HUGEINT (sum of the category's operation durations).
-- Definition: a checksum that costs two aggregations: over the segments, sum(count x length) of
--   each category must equal the summed durations of its operations (each operation is counted
--   in exactly the segments it covers). A counter that overflowed during a segment of positive
--   length is short by 32768 there, and a carry into the next field adds to that field, so every
--   overflow changes at least one category's sum.
-- stage: rank
-- result: step
-- requires: _tp_segments, gpu_ops
CREATE OR REPLACE VIEW _tp_sweep_guard AS
WITH swept AS (
    SELECT rank,
           unnest(['compute', 'memory', 'other', 'comms', 'copy']) AS category,
           unnest([sum(c::HUGEINT * (end_ns - start_ns)), sum(m::HUGEINT * (end_ns - start_ns)),
                   sum(o::HUGEINT * (end_ns - start_ns)), sum(n::HUGEINT * (end_ns - start_ns)),
                   sum(k::HUGEINT * (end_ns - start_ns))]) AS swept_ns
    FROM _tp_segments
    GROUP BY rank
),
busy AS (
    SELECT rank, category, sum(ns) AS busy_ns
    FROM (
        SELECT rank, unnest(CASE WHEN category = 'memory' AND op <> 'kernel' THEN ['memory', 'copy']
                                 ELSE [category] END) AS category,
               (end_ns - start_ns)::HUGEINT AS ns
        FROM gpu_ops
        WHERE end_ns > start_ns AND category IN ('compute', 'memory', 'other', 'comms')
    )
    GROUP BY ALL
)
SELECT s.rank, s.category, s.swept_ns, coalesce(b.busy_ns, 0) AS busy_ns
FROM swept s LEFT JOIN busy b USING (rank, category)
WHERE s.swept_ns IS DISTINCT FROM coalesce(b.busy_ns, 0);
