-- roofline: every Nsight Compute launch placed on its GPU's roofline.
-- Purpose: tell memory-bound kernels (below the ridge point) from compute-bound ones, with the
--   measured FLOPs and DRAM bytes rather than a name rule.
-- Columns: the hfu_ncu_flops columns, plus
--   peak_flops           FLOP/s  dense peak of the launch's precision (ncu_peaks: table, derived
--                                or assumed, see peak_source/peak_reason)
--   mem_bw_bps           byte/s  DRAM bandwidth of the GPU
--   ridge_flop_per_byte  FLOP/byte  peak_flops / mem_bw_bps
--   attainable_flops     FLOP/s  min(peak_flops, intensity * mem_bw_bps): the roof at this intensity
--   achieved_flops       FLOP/s  flops / duration (ncu's replay clocks; compare shapes, not seconds)
--   pct_of_roof          %       100 * achieved / attainable
--   bound                'memory' when intensity < ridge, 'compute' otherwise, NULL when unknown
-- columns: file_id, launch_id, name, fp64_flops, fp32_flops, fp16_flops, tensor_flops, tensor_source, tensor_precision, flops, counts_from, dram_bytes, duration_ns, intensity, precision, missing, peak_flops, mem_bw_bps, ridge_flop_per_byte, attainable_flops, achieved_flops, pct_of_roof, bound, peak_source, peak_reason
-- stage: live
-- requires: hfu_ncu_flops, ncu_peaks
CREATE OR REPLACE VIEW roofline AS
SELECT f.*,
    p.peak_flops, p.mem_bw_bps,
    p.peak_flops / nullif(p.mem_bw_bps, 0) AS ridge_flop_per_byte,
    least(p.peak_flops, f.intensity * p.mem_bw_bps) AS attainable_flops,
    f.flops / nullif(f.duration_ns * 1e-9, 0) AS achieved_flops,
    100.0 * (f.flops / nullif(f.duration_ns * 1e-9, 0)) / nullif(least(p.peak_flops, f.intensity * p.mem_bw_bps), 0)
        AS pct_of_roof,
    CASE WHEN f.intensity IS NULL OR p.peak_flops IS NULL OR p.mem_bw_bps IS NULL THEN NULL
         WHEN f.intensity < p.peak_flops / p.mem_bw_bps THEN 'memory'
         ELSE 'compute' END AS bound,
    p.source AS peak_source, p.reason AS peak_reason
FROM hfu_ncu_flops f
LEFT JOIN ncu_peaks p ON p.file_id = f.file_id AND p.precision = f.precision;
