-- gpu_metric_samples: every gpu_metrics sample with a source-independent metric name and percent.
-- Why: nsys and DCGM name the same hardware activity differently ('Tensor Active [Throughput %]'
--   in percent vs DCGM_FI_PROF_PIPE_TENSOR_ACTIVE as a 0-1 ratio of cycles); comparisons and
--   the HFU estimate need one name and one scale (docs/dcgm.md lists the mapping).
-- Columns: every column of `gpu_metrics` (source NULL of old workspaces shown as 'nsys'), plus
--   metric   VARCHAR  tensor_active | sm_active | sm_occupancy | gr_engine_active | dram_active |
--                     dram_read | dram_write | fp64_active | fp32_active | fp16_active | gpu_util |
--                     mem_copy_util | sm_clock_mhz | power_w | fb_used_mib | fb_free_mib; NULL: other
--   pct      DOUBLE   % of cycles/time active (activity and utilisation metrics only, else NULL)
-- columns: rank, gpu_id, timestamp_ns, metric_name, value, source, file_id, host, gpu_uuid, gpu_name, gpu_instance, utc_ns, sample, labels, rank_match, metric, pct
-- stage: live
-- requires: gpu_metrics
CREATE OR REPLACE VIEW gpu_metric_samples AS
WITH m AS (
    SELECT g.* REPLACE (coalesce(g.source, 'nsys') AS source),
        CASE
            WHEN g.metric_name = 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE' OR g.metric_name ILIKE 'Tensor Active%'
                THEN 'tensor_active'
            WHEN g.metric_name = 'DCGM_FI_PROF_SM_ACTIVE' OR g.metric_name ILIKE 'SMs Active%' THEN 'sm_active'
            WHEN g.metric_name = 'DCGM_FI_PROF_SM_OCCUPANCY' THEN 'sm_occupancy'
            WHEN g.metric_name = 'DCGM_FI_PROF_GR_ENGINE_ACTIVE' OR g.metric_name ILIKE 'GR Active%'
                THEN 'gr_engine_active'
            WHEN g.metric_name = 'DCGM_FI_PROF_DRAM_ACTIVE' THEN 'dram_active'
            WHEN g.metric_name ILIKE 'DRAM Read Bandwidth%' THEN 'dram_read'
            WHEN g.metric_name ILIKE 'DRAM Write Bandwidth%' THEN 'dram_write'
            WHEN g.metric_name = 'DCGM_FI_PROF_PIPE_FP64_ACTIVE' THEN 'fp64_active'
            WHEN g.metric_name = 'DCGM_FI_PROF_PIPE_FP32_ACTIVE' THEN 'fp32_active'
            WHEN g.metric_name = 'DCGM_FI_PROF_PIPE_FP16_ACTIVE' THEN 'fp16_active'
            WHEN g.metric_name = 'DCGM_FI_DEV_GPU_UTIL' THEN 'gpu_util'
            WHEN g.metric_name = 'DCGM_FI_DEV_MEM_COPY_UTIL' THEN 'mem_copy_util'
            WHEN g.metric_name = 'DCGM_FI_DEV_SM_CLOCK' OR g.metric_name ILIKE 'GPC Clock Frequency%'
                THEN 'sm_clock_mhz'
            WHEN g.metric_name = 'DCGM_FI_DEV_POWER_USAGE' THEN 'power_w'
            WHEN g.metric_name = 'DCGM_FI_DEV_FB_USED' THEN 'fb_used_mib'
            WHEN g.metric_name = 'DCGM_FI_DEV_FB_FREE' THEN 'fb_free_mib'
        END AS metric
    FROM gpu_metrics g
)
SELECT m.*,
    CASE
        WHEN m.metric_name LIKE 'DCGM_FI_PROF_%' AND m.metric LIKE '%_active' OR m.metric = 'sm_occupancy'
            THEN 100.0 * m.value
        WHEN m.metric IN ('gpu_util', 'mem_copy_util') THEN m.value
        WHEN m.source = 'nsys' AND m.metric NOT IN ('sm_clock_mhz') THEN m.value
    END AS pct
FROM m;
