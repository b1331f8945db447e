-- _tp_sweep_guard: the (rank, category) pairs whose overlap the sweep cannot count exactly.
-- Why: _tp_segments packs four operation counters of 15 bits each into one running sum, so it is
--   exact only while fewer than 32768 operations of one category overlap on one rank. The
--   analysis stops with a clear error when this returns a row, instead of answering wrongly.
-- Columns: rank INTEGER, category VARCHAR, max_overlap BIGINT (operations of the category
--   running at once, at the worst instant).
-- Definition: cheap in the usual case: a (rank, category) with fewer than 32768 operations, or
--   with fewer than 32768 streams and no two operations overlapping on one stream, cannot reach
--   the limit (at most one operation per stream runs at a time). Only the remaining pairs get an
--   exact running count of their own, and those reaching 32768 are returned.
-- stage: rank
-- result: step
-- requires: gpu_ops
CREATE OR REPLACE VIEW _tp_sweep_guard AS
WITH ops AS (
    SELECT rank, category, stream_id, start_ns, end_ns FROM gpu_ops WHERE end_ns > start_ns
),
per AS (
    SELECT rank, category, count(*) AS n, count(DISTINCT stream_id) AS streams FROM ops GROUP BY ALL
),
big AS (SELECT rank, category, streams FROM per WHERE n >= 32768),
nested AS (
    SELECT DISTINCT rank, category FROM (
        SELECT o.rank, o.category, o.start_ns,
               max(o.end_ns) OVER (PARTITION BY o.rank, o.category, o.stream_id ORDER BY o.start_ns
                                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
        FROM ops o SEMI JOIN big b ON b.rank = o.rank AND b.category = o.category
    ) WHERE prev_end > start_ns
),
suspect AS (
    SELECT rank, category FROM big WHERE streams >= 32768 UNION SELECT rank, category FROM nested
),
counted AS (
    SELECT rank, category,
           sum(d) OVER (PARTITION BY rank, category ORDER BY ts, d ROWS UNBOUNDED PRECEDING) AS running
    FROM (SELECT o.rank, o.category, unnest([o.start_ns, o.end_ns]) AS ts, unnest([1, -1]) AS d
          FROM ops o SEMI JOIN suspect s ON s.rank = o.rank AND s.category = o.category)
)
SELECT rank, category, max(running)::BIGINT AS max_overlap FROM counted GROUP BY ALL
HAVING max(running) >= 32768;
