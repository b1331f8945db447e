-- kernel_flops: FLOPs the hardware counted per profiled kernel and precision, from every counter source.
-- Purpose: one place for counted (hardware) FLOPs, whatever recorded them, each row saying where it
--   came from; HFU (hfu_timeline_flops) reads it. Counters count what ran (padding, recomputation,
--   non-model work included): hardware FLOPs, not model FLOPs.
-- Sources:
--   'ncu'          Nsight Compute launches (hfu_ncu_flops: its counters, conventions and fallbacks)
--   'cupti_range'  PyTorch-profiler traces recorded with the CUPTI range profiler
--                  (kineto_profiler_ranges): the same smsp__sass_thread_inst_executed_op_*_pred_on.sum
--                  counters, so the same arithmetic as hfu_ncu_flops:
--                    fp64 = dadd + dmul + 2*dfma, fp32 = fadd + fmul + 2*ffma,
--                    fp16 = 2*hadd + 2*hmul + 4*hfma (ncu's half-roofline convention: a half
--                    thread-instruction is a packed pair; see hfu_ncu_flops), so both sources give the
--                    same FLOPs for the same counters. A component whose counters are all absent has
--                    no row; an absent op of a present component counts 0. Tensor pipe: from
--                    sm__inst_executed_pipe_tensor.sum (`kineto__tensor_core_insts`) as hfu_ncu_flops
--                    does: 0 when the pipe ran no instruction, x 512 on CC 7.x, unknown (no row, said
--                    in `missing`) on CC >= 8 or when the trace did not record it. DRAM bytes:
--                    dram__bytes.sum, else dram__bytes_read.sum + dram__bytes_write.sum.
-- One row per kernel and counted component; a kernel with no FLOP counter at all has one row with
--   pipe, precision and flops NULL (never dropped).
-- Columns:
--   source             ncu | cupti_range
--   rank               the rank (cupti_range); NULL for ncu (ncu data is not per rank)
--   file_id            the file the counters came from
--   kernel_id          ncu launch_id | kineto_profiler_ranges.range_id (0-based, time order)
--   name               the kernel's name as the source wrote it
--   pipe               cuda_core | tensor
--   precision          cuda_core: fp64 | fp32 | fp16; tensor: hfu_ncu_flops.tensor_precision (cupti_range:
--                      fp16, the CC 7.x x 512 rule's; NULL when the tensor pipe ran no FLOP)
--   flops       FLOP   counted FLOPs of that component
--   dram_bytes  byte   the kernel's DRAM bytes (same on each of its rows; NULL when not measured)
--   counts_from        'count' | 'rate x cycles' (hfu_ncu_flops)
--   missing            what could not be counted for the kernel ('' when complete)
-- columns: source, rank, file_id, kernel_id, name, pipe, precision, flops, dram_bytes, counts_from, missing
-- stage: live
-- requires: hfu_ncu_flops, kineto_profiler_ranges, ranks, gpus
CREATE OR REPLACE VIEW kernel_flops AS
WITH ncu AS (
    SELECT f.file_id, f.launch_id, f.name, f.flops AS total, f.dram_bytes, f.counts_from, f.missing,
        unnest([
            {'i': 1, 'pipe': 'cuda_core', 'precision': 'fp64', 'flops': f.fp64_flops},
            {'i': 2, 'pipe': 'cuda_core', 'precision': 'fp32', 'flops': f.fp32_flops},
            {'i': 3, 'pipe': 'cuda_core', 'precision': 'fp16', 'flops': f.fp16_flops},
            {'i': 4, 'pipe': 'tensor', 'precision': f.tensor_precision, 'flops': f.tensor_flops}
        ]) AS c
    FROM hfu_ncu_flops f
),
cr AS (
    SELECT p.rank, r.file_id, p.range_id, p.name, p.tensor_inst,
        CASE WHEN coalesce(p.dadd, p.dmul, p.dfma) IS NOT NULL THEN
            coalesce(p.dadd, 0) + coalesce(p.dmul, 0) + 2 * coalesce(p.dfma, 0) END AS fp64,
        CASE WHEN coalesce(p.fadd, p.fmul, p.ffma) IS NOT NULL THEN
            coalesce(p.fadd, 0) + coalesce(p.fmul, 0) + 2 * coalesce(p.ffma, 0) END AS fp32,
        CASE WHEN coalesce(p.hadd, p.hmul, p.hfma) IS NOT NULL THEN
            2 * coalesce(p.hadd, 0) + 2 * coalesce(p.hmul, 0) + 4 * coalesce(p.hfma, 0) END AS fp16,
        CASE WHEN p.tensor_inst = 0 THEN 0
             WHEN p.tensor_inst > 0 AND g.compute_major = 7 THEN p.tensor_inst * 512 END AS tensor,
        coalesce(p.dram_bytes, p.dram_read + p.dram_write) AS dram
    FROM kineto_profiler_ranges p
    LEFT JOIN (SELECT rank, any_value(file_id) AS file_id, any_value(device_id) AS device_id
               FROM ranks GROUP BY rank) r USING (rank)
    LEFT JOIN (SELECT rank, device_id, max(compute_major) AS compute_major FROM gpus GROUP BY ALL) g
        ON g.rank = p.rank AND g.device_id IS NOT DISTINCT FROM r.device_id
),
crl AS (
    SELECT *,
        fp64 IS NOT NULL OR fp32 IS NOT NULL OR fp16 IS NOT NULL OR tensor IS NOT NULL AS counted,
        concat_ws(', ',
            CASE WHEN fp64 IS NULL AND fp32 IS NULL AND fp16 IS NULL THEN 'CUDA-core FLOP counters' END,
            CASE WHEN tensor_inst IS NULL
                 THEN 'tensor FLOP counters (record kineto__tensor_core_insts)'
                 WHEN tensor IS NULL
                 THEN 'tensor FLOPs (only sm__inst_executed_pipe_tensor, not converted on CC >= 8: it also counts FP16-pipe instructions and the FLOP per MMA depends on its shape)'
            END,
            CASE WHEN dram IS NULL THEN 'DRAM bytes' END) AS missing,
        unnest([
            {'i': 1, 'pipe': 'cuda_core', 'precision': 'fp64', 'flops': fp64},
            {'i': 2, 'pipe': 'cuda_core', 'precision': 'fp32', 'flops': fp32},
            {'i': 3, 'pipe': 'cuda_core', 'precision': 'fp16', 'flops': fp16},
            {'i': 4, 'pipe': 'tensor', 'precision': CASE WHEN tensor > 0 THEN 'fp16' END, 'flops': tensor}
        ]) AS c
    FROM cr
)
SELECT 'ncu' AS source, NULL::INTEGER AS rank, file_id::INTEGER AS file_id, launch_id::BIGINT AS kernel_id, name,
    CASE WHEN total IS NOT NULL THEN c.pipe END AS pipe,
    CASE WHEN total IS NOT NULL THEN c.precision END AS precision,
    c.flops::DOUBLE AS flops, dram_bytes::DOUBLE AS dram_bytes, counts_from, missing
FROM ncu
WHERE c.flops IS NOT NULL OR (total IS NULL AND c.i = 1)
UNION ALL
SELECT 'cupti_range', rank, file_id::INTEGER, range_id::BIGINT, name,
    CASE WHEN counted THEN c.pipe END,
    CASE WHEN counted THEN c.precision END,
    c.flops::DOUBLE, dram::DOUBLE, 'count', missing
FROM crl
WHERE c.flops IS NOT NULL OR (NOT counted AND c.i = 1);
