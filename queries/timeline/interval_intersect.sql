-- interval_intersect(a, b): union(a) ∩ union(b), per partition key, as maximal disjoint intervals.
-- Why: e.g. comms hidden behind compute = |comms ∩ compute|; kernels inside an NVTX range.
-- Input: two table/view/CTE names (strings), each with columns k, start_ns, end_ns (ns).
-- Columns: k, start_ns BIGINT ns, end_ns BIGINT ns (maximal, disjoint, non-touching).
-- Definition: the segments of interval_sweep(a, b) covered by both sets, merged with interval_union.
--   Keys present in only one set produce nothing.
-- stage: live
-- requires: interval_sweep, interval_union
CREATE OR REPLACE MACRO interval_intersect(a, b) AS TABLE
WITH ii_seg AS (
    SELECT k, start_ns, end_ns FROM interval_sweep(a, b) WHERE in_a > 0 AND in_b > 0
)
SELECT k, start_ns, end_ns FROM interval_union('ii_seg');
