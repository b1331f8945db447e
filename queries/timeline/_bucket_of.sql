-- _bucket_of: the bucket of a time point in an _interval_buckets table (its rank's geometry).
-- Why: every reader of _interval_buckets computes the probe side's bucket the same way.
-- Input: t BIGINT ns, and the rank's origin_ns, width_ns and last_bucket from _interval_buckets.
-- Definition: (t - origin_ns) // width_ns, clamped to [0, last_bucket]; NULL when t is before the
--   rank's first interval (no interval holds it).
-- stage: live
-- requires: (nothing)
CREATE OR REPLACE MACRO _bucket_of(t, origin_ns, width_ns, last_bucket) AS
    CASE WHEN t >= origin_ns THEN least((t - origin_ns) // width_ns, last_bucket) END;
