-- interval_sweep(a, b): the elementary segments of two interval sets, per partition key, with
-- how many intervals of each set cover each segment.
-- Why: intersection and difference (and any other boolean combination) are filters on these
-- segments; one sort of the 4 boundary events replaces pairwise range joins.
-- Input: two table/view/CTE names (strings), each with columns k, start_ns, end_ns (ns).
-- Columns: k, start_ns BIGINT ns, end_ns BIGINT ns (a segment between two consecutive distinct
--   boundaries of either set, positive length), in_a INTEGER, in_b INTEGER (number of intervals
--   of a resp. b covering the segment; > 0 means covered).
-- Definition: zero-length and NULL intervals cover nothing and are dropped. Every boundary of
--   either set is an event (+1 at start, -1 at end); counts are running sums over the events in
--   time order; a segment runs from one event time to the next one of the same k.
-- stage: live
-- requires: (nothing)
CREATE OR REPLACE MACRO interval_sweep(a, b) AS TABLE
WITH is_a AS (
    SELECT k, start_ns, end_ns FROM query_table(a) WHERE end_ns > start_ns
),
is_b AS (
    SELECT k, start_ns, end_ns FROM query_table(b) WHERE end_ns > start_ns
),
is_ev AS (
    SELECT k, start_ns AS ts, 1 AS da, 0 AS db FROM is_a
    UNION ALL SELECT k, end_ns, -1, 0 FROM is_a
    UNION ALL SELECT k, start_ns, 0, 1 FROM is_b
    UNION ALL SELECT k, end_ns, 0, -1 FROM is_b
),
is_agg AS (
    SELECT k, ts, sum(da) AS da, sum(db) AS db FROM is_ev GROUP BY k, ts
),
is_seg AS (
    SELECT
        k,
        ts AS start_ns,
        lead(ts) OVER (PARTITION BY k ORDER BY ts) AS end_ns,
        sum(da) OVER (PARTITION BY k ORDER BY ts ROWS UNBOUNDED PRECEDING) AS in_a,
        sum(db) OVER (PARTITION BY k ORDER BY ts ROWS UNBOUNDED PRECEDING) AS in_b
    FROM is_agg
)
SELECT k, start_ns::BIGINT AS start_ns, end_ns::BIGINT AS end_ns, in_a::INTEGER AS in_a, in_b::INTEGER AS in_b
FROM is_seg
WHERE end_ns IS NOT NULL AND end_ns > start_ns;
