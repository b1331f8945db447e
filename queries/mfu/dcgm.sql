-- The statements of the DCGM cross-check (nsight_analyze/mfu/dcgm.py).

-- name: dcgm_gpus
-- One row per DCGM GPU (or MIG instance) that sampled the tensor pipe: its mean tensor-pipe activity,
-- samples and SM clock, the rank it was matched to, and when it was sampled.
SELECT host, gpu_id, gpu_uuid, gpu_instance, any_value(gpu_name) AS gpu_name, min(rank) AS rank,
       avg(value) FILTER (WHERE metric_name = 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE') AS tensor_active,
       count(*) FILTER (WHERE metric_name = 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE') AS samples,
       avg(value) FILTER (WHERE metric_name = 'DCGM_FI_DEV_SM_CLOCK') AS sm_mhz,
       min(utc_ns) AS first_utc_ns, max(utc_ns) AS last_utc_ns
FROM gpu_metrics WHERE source = 'dcgm'
GROUP BY host, gpu_id, gpu_uuid, gpu_instance
HAVING count(*) FILTER (WHERE metric_name = 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE') > 0
ORDER BY host NULLS LAST, gpu_id, gpu_instance NULLS FIRST

-- name: dcgm_blind_gpus
-- The DCGM GPUs sampled without the tensor-pipe field, and their hosts: said, not left out silently.
SELECT count(*), list(DISTINCT h ORDER BY h) FROM (SELECT coalesce(host, 'host?') AS h
    FROM gpu_metrics WHERE source = 'dcgm' GROUP BY host, gpu_id, gpu_uuid, gpu_instance
    HAVING count(*) FILTER (WHERE metric_name = 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE') = 0)
