-- interval_union(tbl): the union of half-open intervals, per partition key, as maximal disjoint intervals.
-- Why: every time measure (busy, compute, exposed comms) is the length of a union; summing
-- durations double-counts overlapping kernels on several streams.
-- Input: a table, view or CTE name (string) with columns k (partition key, any type, NULL allowed:
--   use a struct such as {'rank': rank, 'stream': stream_id} for several keys), start_ns, end_ns (ns).
-- Columns: k, start_ns BIGINT ns, end_ns BIGINT ns: maximal covered intervals of each k, disjoint,
--   not touching (touching intervals [a,b) and [b,c) merge into [a,c)).
-- Definition: zero-length (end_ns <= start_ns) and NULL intervals cover nothing and are dropped.
--   Sort by (start_ns, end_ns); a new group starts when start_ns > running max of the previous
--   ends; each group's [min start, max end) is one output interval. Vectorised (window functions).
-- stage: live
-- requires: (nothing)
CREATE OR REPLACE MACRO interval_union(tbl) AS TABLE
WITH iu_src AS (
    SELECT k, start_ns, end_ns
    FROM query_table(tbl)
    WHERE end_ns > start_ns
),
iu_prev AS (
    SELECT
        k, start_ns, end_ns,
        max(end_ns) OVER (
            PARTITION BY k ORDER BY start_ns, end_ns ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) AS prev_max_end
    FROM iu_src
),
iu_grp AS (
    SELECT
        k, start_ns, end_ns,
        sum(CASE WHEN prev_max_end IS NULL OR start_ns > prev_max_end THEN 1 ELSE 0 END) OVER (
            PARTITION BY k ORDER BY start_ns, end_ns ROWS UNBOUNDED PRECEDING
        ) AS grp
    FROM iu_prev
)
SELECT k, min(start_ns)::BIGINT AS start_ns, max(end_ns)::BIGINT AS end_ns
FROM iu_grp
GROUP BY k, grp;
