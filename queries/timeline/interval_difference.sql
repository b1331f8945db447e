-- interval_difference(a, b): union(a) \ union(b), per partition key, as maximal disjoint intervals.
-- Why: e.g. exposed comms = comms \ (compute ∪ memory ∪ other); GPU idle = window \ busy.
-- Input: two table/view/CTE names (strings), each with columns k, start_ns, end_ns (ns).
-- Columns: k, start_ns BIGINT ns, end_ns BIGINT ns (maximal, disjoint, non-touching).
-- Definition: the segments of interval_sweep(a, b) covered by a and not by b, merged with
--   interval_union. Keys absent from b keep union(a).
-- stage: live
-- requires: interval_sweep, interval_union
CREATE OR REPLACE MACRO interval_difference(a, b) AS TABLE
WITH id_seg AS (
    SELECT k, start_ns, end_ns FROM interval_sweep(a, b) WHERE in_a > 0 AND in_b = 0
)
SELECT k, start_ns, end_ns FROM interval_union('id_seg');
