-- The statements of the Nsight Compute reader (nsight_analyze/sources/ncu.py).

-- name: insert_metrics
INSERT INTO ncu_metrics SELECT * FROM _ncu_metrics_in

-- name: insert_kernels
-- Launch attributes: from metrics where present (raw page, .ncu-rep, details-page sections),
-- else from the identification columns.
INSERT INTO ncu_kernels
WITH m AS (
    SELECT launch_id,
        max(value) FILTER (WHERE metric = 'launch__grid_size'
                           OR (section = 'Launch Statistics' AND metric = 'Grid Size')) AS grid_size,
        max(value) FILTER (WHERE metric = 'launch__block_size'
                           OR (section = 'Launch Statistics' AND metric = 'Block Size')) AS block_size,
        max(value) FILTER (WHERE metric = 'launch__grid_dim_x') AS gx,
        max(value) FILTER (WHERE metric = 'launch__grid_dim_y') AS gy,
        max(value) FILTER (WHERE metric = 'launch__grid_dim_z') AS gz,
        max(value) FILTER (WHERE metric = 'launch__block_dim_x') AS bx,
        max(value) FILTER (WHERE metric = 'launch__block_dim_y') AS by_,
        max(value) FILTER (WHERE metric = 'launch__block_dim_z') AS bz,
        max(value) FILTER (WHERE metric = 'launch__registers_per_thread'
                           OR (section = 'Launch Statistics' AND metric = 'Registers Per Thread')) AS regs,
        max(value) FILTER (WHERE metric = 'gpu__time_duration.sum'
                           OR (section = 'GPU Speed Of Light Throughput' AND metric = 'Duration')) AS dur,
        max(value_text) FILTER (WHERE metric = 'device__attribute_display_name') AS gpu_name,
        max(value) FILTER (WHERE metric = 'device__attribute_multiprocessor_count') AS sms,
        max(value) FILTER (WHERE metric = 'device__attribute_max_gpu_frequency_khz') AS khz,
        max(value) FILTER (WHERE metric = 'device__attribute_clock_rate') AS clock_khz,
        max(value) FILTER (WHERE metric = 'device__attribute_compute_capability_major') AS ccmaj,
        max(value) FILTER (WHERE metric = 'device__attribute_compute_capability_minor') AS ccmin,
        max(value) FILTER (WHERE metric = 'launch__device_id') AS dev,
        max(value) FILTER (WHERE metric = 'launch__stream_id') AS stream
    FROM ncu_metrics WHERE file_id = ? GROUP BY launch_id
)
SELECT ?, k.launch_id, k.name,
    coalesce(nullif(k.function_name, ''), k.short_name),
    hfu_canon_name(k.name),
    k.process_id, k.process_name, k.host_name, k.context_id, coalesce(m.stream, k.stream_id),
    m.dev::INTEGER,
    coalesce(m.gx, k.grid_x)::INTEGER, coalesce(m.gy, k.grid_y)::INTEGER, coalesce(m.gz, k.grid_z)::INTEGER,
    coalesce(m.bx, k.block_x)::INTEGER, coalesce(m.by_, k.block_y)::INTEGER,
    coalesce(m.bz, k.block_z)::INTEGER,
    coalesce(m.grid_size, k.grid_x * k.grid_y * k.grid_z)::BIGINT,
    coalesce(m.block_size, k.block_x * k.block_y * k.block_z)::BIGINT,
    m.regs::INTEGER, round(m.dur)::BIGINT,
    coalesce(m.gpu_name, nullif(nullif(k.device_text, ''), 'nan')),
    m.sms::INTEGER, (coalesce(m.khz, m.clock_khz) * 1000)::BIGINT,
    coalesce(m.ccmaj, k.cc_major)::INTEGER, coalesce(m.ccmin, k.cc_minor)::INTEGER
FROM _ncu_meta_in k LEFT JOIN m USING (launch_id)
ORDER BY k.launch_id

-- name: file_gpu
-- The file's GPU: device attributes, and which kernel-name families ($families: gpus.families_sql) it ran.
SELECT any_value(gpu_name) FILTER (WHERE gpu_name IS NOT NULL), any_value(sm_count),
       any_value(clock_hz), any_value(compute_major), any_value(compute_minor),
       $families
FROM ncu_kernels WHERE file_id = ?

-- name: dram_bandwidth
-- DRAM bandwidth for a derived peak: 2 transfers/clock x max memory clock x bus width / 8
-- (gives 504.05 GB/s for the RTX 4070 SUPER report, which nsys also reports).
SELECT 2 * max(value) FILTER (WHERE metric = 'device__attribute_max_mem_frequency_khz') * 1000
         * max(value) FILTER (WHERE metric = 'device__attribute_global_memory_bus_width') / 8
FROM ncu_metrics WHERE file_id = ?

-- name: insert_peaks
INSERT INTO ncu_peaks VALUES (?, ?, ?, ?, ?, ?)

-- name: launches_with_counters
-- Launches of the file with a value of a metric matching a pattern (one of REQUIRED_GROUPS).
SELECT count(DISTINCT launch_id) FROM ncu_metrics
WHERE file_id = ? AND regexp_matches(metric, ?) AND value IS NOT NULL

-- name: tensor_flops_unknown
-- Launches with tensor-pipe instructions but no sm__ops_path_tensor_* counters.
SELECT count(*) FROM hfu_ncu_flops
WHERE file_id = ? AND tensor_flops IS NULL AND missing LIKE '%sm__inst%'
