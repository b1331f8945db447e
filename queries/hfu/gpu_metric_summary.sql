-- gpu_metric_summary: one row per source, file, GPU and metric: how many samples, when, and their mean.
-- Why: `info` lists what each DCGM file holds; the HFU estimate of GPUs without a trace reads the
--   mean tensor-pipe activity per GPU from here.
-- Columns:
--   source, file_id, host, gpu_id, gpu_uuid, gpu_instance, gpu_name, rank  the GPU (rank: NULL unless matched)
--   metric_name, metric      as in gpu_metric_samples
--   samples    BIGINT   rows; scrapes: distinct sample ordinals (DCGM) or timestamps (nsys)
--   first_utc_ns, last_utc_ns  BIGINT  wall-clock span (NULL for untimed scrapes)
--   mean, min, max  DOUBLE  of value as stored; mean_pct  DOUBLE  mean of pct
-- columns: source, file_id, host, gpu_id, gpu_uuid, gpu_instance, gpu_name, rank, metric_name, metric, samples, scrapes, first_utc_ns, last_utc_ns, mean, min, max, mean_pct
-- stage: live
-- requires: gpu_metric_samples
CREATE OR REPLACE VIEW gpu_metric_summary AS
SELECT source, file_id, host, gpu_id, gpu_uuid, gpu_instance, any_value(gpu_name) AS gpu_name,
    min(rank) AS rank, metric_name, any_value(metric) AS metric,
    count(*) AS samples, count(DISTINCT coalesce(sample, timestamp_ns)) AS scrapes,
    min(utc_ns) AS first_utc_ns, max(utc_ns) AS last_utc_ns,
    avg(value) AS mean, min(value) AS min, max(value) AS max, avg(pct) AS mean_pct
FROM gpu_metric_samples
GROUP BY source, file_id, host, gpu_id, gpu_uuid, gpu_instance, metric_name
ORDER BY source, file_id, host, gpu_id, gpu_instance NULLS FIRST, metric_name;
