-- roofline: every kernel a hardware-counter source measured, placed on its GPU's roofline, or why not.
-- Purpose: tell memory-bound kernels (below the ridge point) from compute-bound ones, with the
--   measured FLOPs and DRAM bytes rather than a name rule.
-- Sources (a point needs FLOPs and DRAM bytes of the same kernel, counted by the same tool):
--   'ncu'          Nsight Compute launches (hfu_ncu_flops), as before;
--   'cupti_range'  PyTorch-profiler CUPTI range-profiler kernels (kernel_flops): FLOPs from the
--                  kineto__cuda_core_flops counters, tensor FLOPs from kineto__tensor_core_insts,
--                  bytes from dram__bytes_read.sum + dram__bytes_write.sum when the trace recorded
--                  them. A kernel with FLOPs but no bytes (the shared HTA cupti_profiler trace records
--                  only the nine FLOP counters) has no point: intensity and bound stay NULL and
--                  `unplaced` says why; so does one whose tensor FLOPs are unknown (the CUDA-core
--                  FLOPs alone would understate its intensity). Duration: the joined timeline
--                  kernel's (cupti_range_joins), else NULL (the range profiler serialises and replays).
--   Not placed: sampled metrics (nsys GPU metrics, DCGM DRAM_ACTIVE / PIPE_*_ACTIVE) are fractions
--   of cycles per sampling interval over whatever ran, not per-kernel bytes or FLOPs
--   (gpu_metric_summary shows them).
-- Columns: the hfu_ncu_flops columns (cupti_range: launch_id = range_id, tensor_source
--   'no tensor instructions' | 'inst_x512' | NULL), plus
--   peak_flops           FLOP/s  dense peak of the kernel's precision (ncu_peaks of its file: table,
--                                derived or assumed, see peak_source/peak_reason)
--   mem_bw_bps           byte/s  DRAM bandwidth of the GPU
--   ridge_flop_per_byte  FLOP/byte  peak_flops / mem_bw_bps
--   attainable_flops     FLOP/s  min(peak_flops, intensity * mem_bw_bps): the roof at this intensity
--   achieved_flops       FLOP/s  flops / duration (ncu's replay clocks; compare shapes, not seconds)
--   pct_of_roof          %       100 * achieved / attainable
--   bound                'memory' when intensity < ridge, 'compute' otherwise, NULL when unknown
--   peak_source, peak_reason     how the peak was found
--   source               ncu | cupti_range
--   rank                 the rank (cupti_range); NULL for ncu (ncu data is not per rank)
--   unplaced             why the kernel has no point (NULL when it has one)
-- columns: file_id, launch_id, name, fp64_flops, fp32_flops, fp16_flops, tensor_flops, tensor_source, tensor_precision, flops, counts_from, dram_bytes, duration_ns, intensity, precision, missing, peak_flops, mem_bw_bps, ridge_flop_per_byte, attainable_flops, achieved_flops, pct_of_roof, bound, peak_source, peak_reason, source, rank, unplaced
-- stage: live
-- requires: hfu_ncu_flops, kernel_flops, cupti_range_joins, ncu_peaks
CREATE OR REPLACE VIEW roofline AS
WITH cr AS (  -- kernel_flops back to one row per range-profiler kernel
    SELECT rank, any_value(file_id) AS file_id, kernel_id AS launch_id, any_value(name) AS name,
        sum(flops) FILTER (WHERE pipe = 'cuda_core' AND precision = 'fp64') AS fp64_flops,
        sum(flops) FILTER (WHERE pipe = 'cuda_core' AND precision = 'fp32') AS fp32_flops,
        sum(flops) FILTER (WHERE pipe = 'cuda_core' AND precision = 'fp16') AS fp16_flops,
        sum(flops) FILTER (WHERE pipe = 'tensor') AS tensor_flops,
        any_value(precision) FILTER (WHERE pipe = 'tensor') AS tensor_precision,
        count(*) FILTER (WHERE pipe = 'cuda_core') > 0 AS has_cuda,
        sum(flops) AS flops, any_value(counts_from) AS counts_from,
        any_value(dram_bytes) AS dram_bytes, any_value(missing) AS missing
    FROM kernel_flops WHERE source = 'cupti_range' GROUP BY rank, kernel_id
),
crp AS (
    SELECT c.*, j.end_ns - j.start_ns AS duration_ns,
        has_cuda AND tensor_flops IS NOT NULL AS complete,
        CASE WHEN tensor_flops IS NULL THEN NULL WHEN tensor_flops > 0 THEN 'inst_x512'
             ELSE 'no tensor instructions' END AS tensor_source
    FROM cr c LEFT JOIN cupti_range_joins j ON j.rank = c.rank AND j.range_id = c.launch_id AND j.status = 'joined'
),
pts AS (
    SELECT f.*, 'ncu' AS source, NULL::INTEGER AS rank,
        CASE WHEN f.flops IS NULL THEN 'no FLOP counters'
             WHEN f.intensity IS NULL THEN 'no DRAM bytes (dram__bytes.sum)' END AS why
    FROM hfu_ncu_flops f
    UNION ALL BY NAME
    SELECT file_id, launch_id, name, fp64_flops, fp32_flops, fp16_flops, tensor_flops, tensor_source,
        tensor_precision, flops, counts_from, dram_bytes, duration_ns,
        CASE WHEN complete AND dram_bytes > 0 THEN flops / dram_bytes END AS intensity,
        CASE WHEN flops IS NULL THEN NULL
             WHEN coalesce(tensor_flops, 0) > 0
                  AND tensor_flops >= greatest(coalesce(fp64_flops, 0), coalesce(fp32_flops, 0), coalesce(fp16_flops, 0))
                  THEN coalesce(tensor_precision, 'fp16')
             WHEN coalesce(fp64_flops, 0) > greatest(coalesce(fp32_flops, 0), coalesce(fp16_flops, 0)) THEN 'fp64'
             ELSE 'fp32' END AS precision,
        missing, 'cupti_range' AS source, rank,
        nullif(concat_ws('; ',
            CASE WHEN NOT has_cuda AND tensor_flops IS NULL THEN 'no FLOP counters'
                 WHEN NOT has_cuda THEN 'no CUDA-core FLOP counters (record kineto__cuda_core_flops)'
                 WHEN coalesce(dram_bytes, 0) <= 0
                 THEN 'FLOPs but no DRAM bytes (record dram__bytes_read.sum and dram__bytes_write.sum)' END,
            CASE WHEN has_cuda AND tensor_flops IS NULL
                 THEN 'tensor FLOPs unknown (record kineto__tensor_core_insts; on CC >= 8 tensor instructions are not converted to FLOPs)' END),
            '') AS why
    FROM crp
)
SELECT f.* EXCLUDE (source, rank, why),
    p.peak_flops, p.mem_bw_bps,
    p.peak_flops / nullif(p.mem_bw_bps, 0) AS ridge_flop_per_byte,
    least(p.peak_flops, f.intensity * p.mem_bw_bps) AS attainable_flops,
    f.flops / nullif(f.duration_ns * 1e-9, 0) AS achieved_flops,
    100.0 * (f.flops / nullif(f.duration_ns * 1e-9, 0)) / nullif(least(p.peak_flops, f.intensity * p.mem_bw_bps), 0)
        AS pct_of_roof,
    CASE WHEN f.intensity IS NULL OR p.peak_flops IS NULL OR p.mem_bw_bps IS NULL THEN NULL
         WHEN f.intensity < p.peak_flops / p.mem_bw_bps THEN 'memory'
         ELSE 'compute' END AS bound,
    p.source AS peak_source, p.reason AS peak_reason,
    f.source, f.rank,
    coalesce(f.why, CASE WHEN p.peak_flops IS NULL OR p.mem_bw_bps IS NULL
                         THEN 'GPU peak or bandwidth unknown: ' || coalesce(p.reason, 'no peak row for the file') END)
        AS unplaced
FROM pts f
LEFT JOIN ncu_peaks p ON p.file_id = f.file_id AND p.precision = f.precision;
