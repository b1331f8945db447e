-- gpu_metric_compare: where nsys and DCGM sampled the same metric of the same rank's GPU over the
--   same time, both means and their ratio (never one silently instead of the other).
-- Why: nsys samples at kHz inside a short capture; DCGM every few seconds, each value the mean over
--   its interval. Over the window both cover they should agree; the ratio says how well.
-- Columns:
--   rank, metric               the rank's GPU and the source-independent metric (gpu_metric_samples)
--   start_ns, end_ns  BIGINT   the rank's file time both sources cover (overlap of their spans)
--   nsys_samples, dcgm_samples BIGINT  samples inside it
--   nsys_pct, dcgm_pct  DOUBLE mean percent of each source
--   dcgm_over_nsys      DOUBLE dcgm_pct / nsys_pct
-- columns: rank, metric, start_ns, end_ns, nsys_samples, dcgm_samples, nsys_pct, dcgm_pct, dcgm_over_nsys
-- stage: live
-- requires: gpu_metric_samples
CREATE OR REPLACE VIEW gpu_metric_compare AS
WITH s AS (
    SELECT rank, source, metric, timestamp_ns, pct FROM gpu_metric_samples
    WHERE rank IS NOT NULL AND timestamp_ns IS NOT NULL AND pct IS NOT NULL AND gpu_instance IS NULL
),
span AS (SELECT rank, metric, source, min(timestamp_ns) AS lo, max(timestamp_ns) AS hi FROM s GROUP BY ALL),
ov AS (
    SELECT n.rank, n.metric, greatest(n.lo, d.lo) AS lo, least(n.hi, d.hi) AS hi
    FROM span n JOIN span d ON d.rank = n.rank AND d.metric = n.metric
    WHERE n.source = 'nsys' AND d.source = 'dcgm' AND greatest(n.lo, d.lo) <= least(n.hi, d.hi)
),
agg AS (
    SELECT ov.rank, ov.metric, ov.lo AS start_ns, ov.hi AS end_ns,
        count(*) FILTER (WHERE s.source = 'nsys') AS nsys_samples,
        count(*) FILTER (WHERE s.source = 'dcgm') AS dcgm_samples,
        avg(s.pct) FILTER (WHERE s.source = 'nsys') AS nsys_pct,
        avg(s.pct) FILTER (WHERE s.source = 'dcgm') AS dcgm_pct
    FROM ov JOIN s ON s.rank = ov.rank AND s.metric = ov.metric AND s.timestamp_ns BETWEEN ov.lo AND ov.hi
    GROUP BY ALL
)
SELECT *, dcgm_pct / nullif(nsys_pct, 0) AS dcgm_over_nsys FROM agg ORDER BY rank, metric;
