-- gemm_precision(name): the precision a GEMM kernel computes in (its A/B input type), read from its name.
-- Purpose: FP32 GEMMs (CUDA-core FFMA, or TF32 tensor cores) on a GPU with bf16/fp16 tensor cores
--   leave most of its dense peak unused (docs/diagnose.md `gemm-precision`); the kernel name is the
--   evidence every trace has (the op's `Input type`, where recorded, is read beside it: op_flops).
-- Returns: VARCHAR 'fp8' | 'int8' | 'bf16' | 'fp16' | 'tf32' | 'fp64' | 'fp32', or NULL when the
--   name states no type (cuBLASLt nvjet_*, Triton templates, a bare s16816 MMA shape).
-- Order (first match wins): a name carries its input, output and accumulator types, and MMA-shape
--   tokens that only say the instruction; the narrowest explicit INPUT type wins, shapes only decide
--   when no type is named:
--   1. AMD Tensile (Cijk_A.._B.._<T>...): the type code after the layouts is the input type: F8/B8
--      fp8, I8/4xi8 int8, B bf16 (BBS), H fp16 (HHS), X xf32 = tf32, S fp32 (SB), D fp64.
--   2. explicit types: fp8 (e4m3, e5m2, fp8); int8 (i8i8, int8, imma, s8s8); bf16 (bf16, bfloat16);
--      fp16 (fp16, f16, half, hgemm; checked after bf16, whose name holds f16); tf32 (tf32, xf32;
--      before fp32, whose f32 it holds). The output or accumulator type never outranks the input:
--      sm90_xmma_gemm_e4m3e4m3_bf16f32 is fp8, cutlass_75_tensorop_bf16_s1688gemm_bf16 bf16 (its
--      s1688 says only fp32 accumulate on a 16x8x8 MMA), turing_fp16_s1688gemm_fp16 fp16.
--   3. MMA shapes with no type named: h884/h1688/h16816 (half MMA) and s884 (Volta's only MMA is
--      fp16) fp16; i8816/i16832 int8; s1688gemm tf32 (fp32 operands on tensor cores: cuBLAS's and
--      CUTLASS's TF32 path, cutlass_80_tensorop_s1688gemm_*, ampere_s1688gemm_*); d884/dmma fp64.
--   4. fp64 (dgemm, zgemm, f64, fp64, double); fp32 (sgemm, cgemm, ffma, f32, fp32, float).
--   e.g. sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_..._ffma_... fp32, sm80_xmma_..._tf32f32_tf32f32_f32 tf32,
--   volta_sgemm_128x64_nn fp32, volta_h884gemm_* fp16, sm90_xmma_gemm_bf16bf16_bf16f32_f32_* bf16.
-- stage: live
-- requires: (nothing)
CREATE OR REPLACE MACRO gemm_precision(name) AS CASE
    WHEN regexp_matches(name, 'Cijk_A[a-zA-Z]+_B[a-zA-Z]+_(F8|B8)') THEN 'fp8'
    WHEN regexp_matches(name, 'Cijk_A[a-zA-Z]+_B[a-zA-Z]+_(I8|4xi8)') THEN 'int8'
    WHEN regexp_matches(name, 'Cijk_A[a-zA-Z]+_B[a-zA-Z]+_B') THEN 'bf16'
    WHEN regexp_matches(name, 'Cijk_A[a-zA-Z]+_B[a-zA-Z]+_H') THEN 'fp16'
    WHEN regexp_matches(name, 'Cijk_A[a-zA-Z]+_B[a-zA-Z]+_X') THEN 'tf32'
    WHEN regexp_matches(name, 'Cijk_A[a-zA-Z]+_B[a-zA-Z]+_S') THEN 'fp32'
    WHEN regexp_matches(name, 'Cijk_A[a-zA-Z]+_B[a-zA-Z]+_D') THEN 'fp64'
    WHEN regexp_matches(name, '(?i)e4m3|e5m2|fp8') THEN 'fp8'
    WHEN regexp_matches(name, '(?i)i8i8|int8|imma|s8s8') THEN 'int8'
    WHEN regexp_matches(name, '(?i)bf16|bfloat16') THEN 'bf16'
    WHEN regexp_matches(name, '(?i)fp16|f16|half|hgemm') THEN 'fp16'
    WHEN regexp_matches(name, '(?i)tf32|xf32') THEN 'tf32'
    WHEN regexp_matches(name, '(?i)h884|h1688|h16816|s884gemm') THEN 'fp16'
    WHEN regexp_matches(name, '(?i)i8816|i16832') THEN 'int8'
    WHEN regexp_matches(name, '(?i)s1688gemm') THEN 'tf32'
    WHEN regexp_matches(name, '(?i)d884|dmma|dgemm|zgemm|f64|fp64|double') THEN 'fp64'
    WHEN regexp_matches(name, '(?i)sgemm|cgemm|ffma|f32|fp32|float') THEN 'fp32'
END;
