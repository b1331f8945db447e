-- gemm_alignment(name): the operand alignment a CUTLASS / xmma GEMM kernel was built for, in elements.
-- Purpose: cuBLAS picks a kernel whose vector loads fit the operands' leading dimensions; a kernel
--   built for alignment 1 or 2 (`_align1`, `_align2`) loads element by element because a dimension
--   is not a multiple of 16 bytes (8 bf16/fp16 elements, 4 fp32, 16 fp8), and runs far below the
--   aligned kernels' rate (docs/diagnose.md `unaligned-gemm`). Times the element size
--   (gemm_precision) it is the alignment in bytes; below 16 the GEMM is unaligned.
-- Returns: INTEGER elements from the first `_align<N>` / `_align{a,b,c}<N>` token, or NULL when the
--   name has none (cuBLAS ampere_*/volta_* and nvjet names, AMD Tensile names: unknown, not aligned).
--   e.g. cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_tn_align2 -> 2,
--   sm80_xmma_gemm_f32f32_f32f32_f32_..._ffma_aligna4 -> 4.
-- stage: live
-- requires: (nothing)
CREATE OR REPLACE MACRO gemm_alignment(name) AS
    TRY_CAST(nullif(regexp_extract(name, '_align[abc]?([0-9]+)', 1), '') AS INTEGER);
