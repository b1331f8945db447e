-- gemm_precision(name): the precision a GEMM kernel computes in, read from its name.
-- Purpose: FP32 GEMMs (CUDA-core FFMA, or TF32 tensor cores) on a GPU with bf16/fp16 tensor cores
--   leave most of its dense peak unused (docs/diagnose.md `gemm-precision`).
-- Returns: VARCHAR 'tf32' | 'fp8' | 'bf16' | 'int8' | 'fp16' | 'fp64' | 'fp32', or NULL when the
--   name has no marker (cuBLASLt nvjet_* names, most CUTLASS/Triton templates). Markers, first
--   match wins: tf32 (tf32, xf32, cuBLAS s1688gemm), fp8 (e4m3, e5m2, fp8), bf16 (bf16, bfloat16),
--   int8 (i8i8, int8, imma), fp16 (fp16, half, h884/h1688/h16816 MMA shapes, hgemm, f16), fp64
--   (dgemm, f64, fp64, double), fp32 (sgemm, ffma, f32f32_f32, fp32, float): e.g.
--   sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_..._ffma_... is fp32, ampere_s1688gemm_... tf32,
--   sm90_xmma_gemm_bf16bf16_bf16f32_f32_... bf16.
-- stage: live
-- requires: (nothing)
CREATE OR REPLACE MACRO gemm_precision(name) AS CASE
    WHEN regexp_matches(name, '(?i)tf32|xf32|s1688gemm') THEN 'tf32'
    WHEN regexp_matches(name, '(?i)e4m3|e5m2|fp8') THEN 'fp8'
    WHEN regexp_matches(name, '(?i)bf16|bfloat16') THEN 'bf16'
    WHEN regexp_matches(name, '(?i)i8i8|int8|imma') THEN 'int8'
    WHEN regexp_matches(name, '(?i)fp16|half|h884|h1688|h16816|hgemm|f16') THEN 'fp16'
    WHEN regexp_matches(name, '(?i)dgemm|f64|fp64|double') THEN 'fp64'
    WHEN regexp_matches(name, '(?i)sgemm|ffma|f32f32_f32|fp32|float') THEN 'fp32'
END;
