-- _interval_buckets: a table of per-rank intervals cut into equal-width time buckets, so that
-- finding the interval of millions of time points is a hash join on (rank, bucket) with a build
-- side of a few rows per interval, instead of an ASOF join.
-- Why: an ASOF join sorts its whole probe side with every column it carries: placing 16 ranks x
--   200k kernels in their step windows cost 1.8 s of CPU in _kernel_windows (0.8 s now), and each
--   operation's launch in its NVTX step another 0.8 s in tp_step_ops.
-- Input: macro parameter tbl, the name of a table or view (TEMP ones included) with the columns
--   rank, start_ns and end_ns (end_ns may be NULL: open to the right); every other column is
--   passed through.
-- Columns: every column of tbl, then until_ns BIGINT ns (where the interval stops owning time:
--   its end, or the next interval's start when that comes first; 9223372036854775807 when
--   neither exists: the reader's `t < until_ns` stays a plain comparison), origin_ns BIGINT
--   ns, width_ns BIGINT ns, last_bucket BIGINT (the rank's bucket geometry: the same on every row
--   of a rank), bucket BIGINT (one row per bucket the interval owns time in).
-- Definition: a time point t of rank r lies in the interval of the row with bucket =
--   _bucket_of(t, origin_ns, width_ns, last_bucket) and start_ns <= t < until_ns;
--   at most one row matches, and it is the interval an ASOF join finds: the last interval of the
--   rank starting at or before t (ties: the shortest, an open one longest of all; then any), kept
--   when t is before its end.
--   Intervals with end_ns <= start_ns own no time and are skipped (an ASOF join would find one
--   and drop t; none of the readers' inputs has such an interval that another one covers).
--   The rank's buckets: origin_ns its first start, width_ns the span of its starts over 4 x its
--   intervals (at least 1 ns), so a rank has about 5 rows per interval whatever their lengths;
--   the last interval owns its start's bucket, and later time points are clamped into it.
-- stage: live
-- requires: (nothing)
CREATE OR REPLACE MACRO _interval_buckets(tbl) AS TABLE
WITH owned AS (
    SELECT *,
           -- open to the right: the largest BIGINT (a plain comparison keeps the readers' joins hash joins)
           least(coalesce(end_ns, 9223372036854775807), coalesce(lead(start_ns) OVER w, 9223372036854775807))
               AS until_ns
    FROM query_table(tbl)
    WHERE start_ns IS NOT NULL AND (end_ns IS NULL OR end_ns > start_ns)
    WINDOW w AS (PARTITION BY rank ORDER BY start_ns, end_ns DESC NULLS FIRST)  -- ties: the shortest last
),
spans AS (
    SELECT *, min(start_ns) OVER r AS origin_ns, max(start_ns) OVER r AS last_start_ns,
           count(*) OVER r AS intervals
    FROM owned
    WHERE until_ns > start_ns
    WINDOW r AS (PARTITION BY rank)
),
geometry AS (
    SELECT * EXCLUDE (intervals), (last_start_ns - origin_ns) // width_ns AS last_bucket
    FROM (SELECT *, greatest((last_start_ns - origin_ns) // (4 * intervals), 1) AS width_ns FROM spans)
)
SELECT * EXCLUDE (last_start_ns),
       -- only the last interval reaches past the last start: it owns that start's bucket alone
       unnest(range((start_ns - origin_ns) // width_ns,
                    (least(until_ns - 1, last_start_ns) - origin_ns) // width_ns + 1)) AS bucket
FROM geometry;
