-- hfu_ncu_flops: executed FLOPs, DRAM bytes and arithmetic intensity of every Nsight Compute launch.
-- Purpose: the HFU numerator. Hardware counters count what ran (padding, recomputation and
--   non-model work included), so this is hardware FLOPs, not model FLOPs.
-- Columns:
--   file_id, launch_id, name          the launch (ncu_kernels)
--   fp64_flops  FLOP   dadd + dmul + 2*dfma           (sm__sass_thread_inst_executed_op_*_pred_on.sum)
--   fp32_flops  FLOP   fadd + fmul + 2*ffma
--   fp16_flops  FLOP   2*hadd + 2*hmul + 4*hfma: ncu's half roofline convention (its derived
--                      metrics are ..._hadd_pred_on_x2, _hmul_pred_on_x2, _hfma_pred_on_x4): a half
--                      thread-instruction is a packed pair, an FMA counts 2 per element
--   tensor_flops FLOP  sum of sm__ops_path_tensor_src_*[_dst_*].sum (FLOPs, FMA = 2; sparsity
--                      variants summed only when the aggregate is absent); on CC 7.x, where those
--                      counters do not exist, sm__inst_executed_pipe_tensor.sum * 512; 0 when the
--                      tensor pipe executed no instruction; NULL when unknown
--   tensor_source      'ops_path' | 'inst_x512' | 'no tensor instructions' | NULL
--   tensor_precision   fp16 | bf16 | tf32 | fp64_tc | int8 | fp8 (largest tensor component)
--   flops       FLOP   sum of the known components; NULL when the launch has no FLOP counter
--   counts_from        'count' or 'rate x cycles' (totals rebuilt as .sum.per_cycle_elapsed x
--                      sm[sp]__cycles_elapsed.avg where only rates were collected; last resort: the
--                      roofline sections' derived__smsp__..._x2/_x4 rates divided by 2/4. The
--                      derived__sm__... variants are peaks, never used)
--   dram_bytes  byte   dram__bytes.sum, else read + write, else .per_second x duration
--   duration_ns ns     gpu__time_duration.sum (under ncu's clock control)
--   intensity   FLOP/byte  flops / dram_bytes (NULL when no DRAM traffic was measured)
--   precision          the precision whose roof applies (largest FLOP component; CUDA-core FP16
--                      uses the FP32 roof: the table has no FP16 non-tensor peak)
--   missing            what could not be counted, comma separated ('' when complete)
-- columns: file_id, launch_id, name, fp64_flops, fp32_flops, fp16_flops, tensor_flops, tensor_source, tensor_precision, flops, counts_from, dram_bytes, duration_ns, intensity, precision, missing
-- stage: live
-- requires: ncu_kernels, ncu_metrics
CREATE OR REPLACE VIEW hfu_ncu_flops AS
WITH cyc AS (
    SELECT file_id, launch_id,
        max(value) FILTER (WHERE metric = 'smsp__cycles_elapsed.avg') AS smsp_cycles,
        max(value) FILTER (WHERE metric = 'sm__cycles_elapsed.avg') AS sm_cycles,
        max(value) FILTER (WHERE metric = 'dram__bytes.sum') AS dram,
        max(value) FILTER (WHERE metric = 'dram__bytes_read.sum') AS dram_rd,
        max(value) FILTER (WHERE metric = 'dram__bytes_write.sum') AS dram_wr,
        max(value) FILTER (WHERE metric = 'dram__bytes.sum.per_second') AS dram_rate,
        max(value) FILTER (WHERE metric = 'sm__inst_executed_pipe_tensor.sum') AS tensor_inst
    FROM ncu_metrics GROUP BY file_id, launch_id
),
ops AS (
    SELECT m.file_id, m.launch_id,
        regexp_extract(m.metric, 'op_([dfh](add|mul|fma))_pred_on', 1) AS op,
        (CASE WHEN m.metric LIKE '%.per_cycle_elapsed' THEN 2 ELSE 0 END
         + CASE WHEN m.metric LIKE 'smsp__%' THEN 1 ELSE 0 END) AS pref,
        CASE WHEN m.metric LIKE '%.per_cycle_elapsed'
             THEN round(m.value * CASE WHEN m.metric LIKE 'smsp__%' THEN c.smsp_cycles ELSE c.sm_cycles END)
             ELSE m.value END AS n
    FROM ncu_metrics m JOIN cyc c USING (file_id, launch_id)
    WHERE regexp_matches(m.metric,
            '^(sm|smsp)__sass_thread_inst_executed_op_[dfh](add|mul|fma)_pred_on\.sum(\.per_cycle_elapsed)?$')
      AND m.value IS NOT NULL
),
ops_derived AS (  -- ncu's roofline-section metrics: per-cycle rate x2 (FMA, HADD, HMUL) or x4 (HFMA)
    SELECT m.file_id, m.launch_id,
        regexp_extract(m.metric, 'op_([dfh](add|mul|fma))_pred_on', 1) AS op,
        4 AS pref,
        round(m.value / CASE WHEN m.metric LIKE '%_x4' THEN 4 ELSE 2 END * c.smsp_cycles) AS n
    FROM ncu_metrics m JOIN cyc c USING (file_id, launch_id)
    WHERE regexp_matches(m.metric, '^derived__smsp__sass_thread_inst_executed_op_[dfh](add|mul|fma)_pred_on_x[24]$')
      AND m.value IS NOT NULL
),
ops_best AS (
    SELECT file_id, launch_id, op, arg_min(n, pref) AS n, min(pref) >= 2 AS from_rate
    FROM (SELECT * FROM ops UNION ALL SELECT * FROM ops_derived) WHERE n IS NOT NULL GROUP BY ALL
),
cuda AS (
    SELECT file_id, launch_id,
        CASE WHEN count(*) FILTER (WHERE op LIKE 'd%') > 0 THEN
            coalesce(sum(n) FILTER (WHERE op IN ('dadd', 'dmul')), 0) + 2 * coalesce(sum(n) FILTER (WHERE op = 'dfma'), 0)
        END AS fp64_flops,
        CASE WHEN count(*) FILTER (WHERE op LIKE 'f%') > 0 THEN
            coalesce(sum(n) FILTER (WHERE op IN ('fadd', 'fmul')), 0) + 2 * coalesce(sum(n) FILTER (WHERE op = 'ffma'), 0)
        END AS fp32_flops,
        CASE WHEN count(*) FILTER (WHERE op LIKE 'h%') > 0 THEN
            2 * coalesce(sum(n) FILTER (WHERE op IN ('hadd', 'hmul')), 0) + 4 * coalesce(sum(n) FILTER (WHERE op = 'hfma'), 0)
        END AS fp16_flops,
        bool_or(from_rate) AS from_rate
    FROM ops_best GROUP BY ALL
),
tens AS (
    SELECT m.file_id, m.launch_id,
        regexp_extract(m.metric, '^(sm|smsp)__ops_path_tensor_(src_[a-z0-9_]+?)(_sparsity_(on|off))?\.sum', 2) AS kind,
        (CASE WHEN m.metric LIKE '%.per_cycle_elapsed' THEN 2 ELSE 0 END
         + CASE WHEN m.metric LIKE 'smsp__%' THEN 1 ELSE 0 END
         + CASE WHEN m.metric LIKE '%_sparsity_%' THEN 4 ELSE 0 END) AS pref,
        CASE WHEN m.metric LIKE '%.per_cycle_elapsed'
             THEN round(m.value * CASE WHEN m.metric LIKE 'smsp__%' THEN c.smsp_cycles ELSE c.sm_cycles END)
             ELSE m.value END AS n
    FROM ncu_metrics m JOIN cyc c USING (file_id, launch_id)
    WHERE regexp_matches(m.metric, '^(sm|smsp)__ops_path_tensor_src_[a-z0-9_]+\.sum(\.per_cycle_elapsed)?$')
      AND m.value IS NOT NULL
),
tens_pref AS (  -- sparsity on + off summed within one preference level
    SELECT file_id, launch_id, kind, pref, sum(n) AS n FROM tens WHERE n IS NOT NULL GROUP BY ALL
),
tens_best AS (
    SELECT file_id, launch_id, kind, arg_min(n, pref) AS n, min(pref) & 2 = 2 AS from_rate
    FROM tens_pref GROUP BY ALL
),
tensor AS (
    SELECT file_id, launch_id, sum(n) AS flops, arg_max(kind, n) FILTER (WHERE n > 0) AS top_kind, bool_or(from_rate) AS from_rate
    FROM tens_best GROUP BY ALL
),
launch AS (
    SELECT k.file_id, k.launch_id, k.name, k.compute_major, k.duration_ns,
        cu.fp64_flops, cu.fp32_flops, cu.fp16_flops,
        CASE WHEN t.flops IS NOT NULL THEN t.flops
             WHEN c.tensor_inst = 0 THEN 0
             WHEN k.compute_major = 7 AND c.tensor_inst IS NOT NULL THEN c.tensor_inst * 512
        END AS tensor_flops,
        CASE WHEN t.flops IS NOT NULL THEN 'ops_path'
             WHEN c.tensor_inst = 0 THEN 'no tensor instructions'
             WHEN k.compute_major = 7 AND c.tensor_inst IS NOT NULL THEN 'inst_x512'
        END AS tensor_source,
        CASE WHEN t.flops IS NULL AND k.compute_major = 7 AND c.tensor_inst > 0 THEN 'fp16'
             WHEN t.top_kind LIKE 'src_fp64%' THEN 'fp64_tc'
             WHEN t.top_kind LIKE 'src_bf16%' THEN 'bf16'
             WHEN t.top_kind LIKE 'src_tf32%' THEN 'tf32'
             WHEN t.top_kind LIKE 'src_int%' THEN 'int8'
             WHEN regexp_matches(t.top_kind, 'src_(fp8|fp6|fp4)') THEN 'fp8'
             WHEN t.top_kind IS NOT NULL THEN 'fp16'
        END AS tensor_precision,
        c.tensor_inst,
        coalesce(cu.from_rate, false) OR coalesce(t.from_rate, false) AS from_rate,
        coalesce(c.dram, c.dram_rd + c.dram_wr, round(c.dram_rate * k.duration_ns * 1e-9)) AS dram_bytes
    FROM ncu_kernels k
    LEFT JOIN cyc c USING (file_id, launch_id)
    LEFT JOIN cuda cu USING (file_id, launch_id)
    LEFT JOIN tensor t USING (file_id, launch_id)
)
SELECT file_id, launch_id, name, fp64_flops, fp32_flops, fp16_flops, tensor_flops, tensor_source,
    tensor_precision,
    CASE WHEN fp64_flops IS NULL AND fp32_flops IS NULL AND fp16_flops IS NULL AND tensor_flops IS NULL THEN NULL
         ELSE coalesce(fp64_flops, 0) + coalesce(fp32_flops, 0) + coalesce(fp16_flops, 0) + coalesce(tensor_flops, 0)
    END AS flops,
    CASE WHEN from_rate THEN 'rate x cycles' ELSE 'count' END AS counts_from,
    dram_bytes, duration_ns,
    CASE WHEN dram_bytes > 0 THEN
        (coalesce(fp64_flops, 0) + coalesce(fp32_flops, 0) + coalesce(fp16_flops, 0) + coalesce(tensor_flops, 0))
        / dram_bytes END AS intensity,
    CASE WHEN fp64_flops IS NULL AND fp32_flops IS NULL AND fp16_flops IS NULL AND tensor_flops IS NULL THEN NULL
         WHEN coalesce(tensor_flops, 0) > 0
              AND tensor_flops >= greatest(coalesce(fp64_flops, 0), coalesce(fp32_flops, 0), coalesce(fp16_flops, 0))
              THEN coalesce(tensor_precision, 'fp16')
         WHEN coalesce(fp64_flops, 0) > greatest(coalesce(fp32_flops, 0), coalesce(fp16_flops, 0)) THEN 'fp64'
         ELSE 'fp32'
    END AS precision,
    concat_ws(', ',
        CASE WHEN fp64_flops IS NULL AND fp32_flops IS NULL AND fp16_flops IS NULL THEN 'CUDA-core FLOP counters' END,
        CASE WHEN tensor_flops IS NULL AND tensor_inst IS NOT NULL
             THEN 'tensor FLOPs (only sm__inst_executed_pipe_tensor, not converted on CC >= 8: it also counts FP16-pipe instructions and the FLOP per MMA depends on its shape)'
             WHEN tensor_flops IS NULL THEN 'tensor FLOP counters' END,
        CASE WHEN dram_bytes IS NULL THEN 'DRAM bytes' END) AS missing
FROM launch;
