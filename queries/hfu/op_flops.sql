-- op_flops: FLOPs, bytes and achieved TFLOP/s of every matmul, convolution and attention op whose
--   shapes the trace recorded: a roofline point per op without Nsight Compute.
-- Why: a kernel carries no shapes, but the PyTorch op that launched it does (Kineto
--   record_shapes=True: `Input Dims`, `Input type`, `Concrete Inputs`, kept in kineto_op_shapes;
--   nsys --pytorch=autograd-shapes-nvtx: the `sizes = [[...]]` of the op's NVTX range, in nvtx).
--   From them follow the op's FLOPs and bytes, and with its kernels' time the op's achieved
--   TFLOP/s and arithmetic intensity; summed per step they are the model FLOPs of the step from
--   the trace itself (mfu uses them when --model-flops-per-step is not given). The GEMM findings
--   read the rows as evidence (dtype, m/n/k, achieved TFLOP/s).
-- Which ops: the names of sources/kineto/duck_json.COMPUTE_OPS; one row per LEAF op, an op with no
--   such op inside it on its thread (aten::linear -> aten::addmm: the addmm; sdpa ->
--   _scaled_dot_product_flash_attention -> _flash_attention_forward: the last), so nothing is
--   counted twice; the backward's aten::mm calls (under MmBackward0) count themselves.
--   The pattern below also names vLLM's _vllm_fa2_C / _vllm_fa3_C ops, which reach kineto_op_shapes once
--   COMPUTE_OPS holds them.
-- Formulas (docs/metrics.md "FLOPs from shapes"); dims are `Input Dims`, A [..., M, K], B [..., K, N]:
--   aten::mm, aten::_scaled_mm   2*M*N*K
--   aten::addmm                  2*M*N*K + M*N (the bias add; TraceLens counts it too)
--   aten::bmm                    2*B*M*N*K;  aten::baddbmm  2*B*M*N*K + B*M*N
--   aten::matmul                 2*prod(batch)*M*N*K (batch: A's leading dims, or B's when they
--                                broadcast from 1; NULL for 1-D operands or other broadcasts)
--   aten::linear                 input [..., K], weight [N, K]: 2*prod(...)*N*K, + prod(...)*N with a bias
--   convolution                  2 * N * prod(out spatial) * prod(weight dims)
--                                (= 2 * N * Cout * Hout*Wout * Cin/groups * kh*kw); out spatial from
--                                stride/padding/dilation (`Concrete Inputs`)
--   transposed convolution       2 * N * prod(input spatial) * prod(weight dims) (weight [Cin, Cout/groups,
--                                k...]: 2 * N * Cin * H*W * Cout/groups * kh*kw, as TraceLens); NULL when
--                                transposed or not is unrecorded
--   aten::convolution_backward   the forward's FLOPs (out spatial from grad_output) once per gradient
--                                its output_mask asks for (input, weight)
--   attention (flash / efficient / cudnn / sdpa; flash_attn, flash_attn_3, aiter mha_fwd / fmha_v3_fwd / mha_bwd /
--                                fmha_v3_bwd, vLLM _vllm_fa3_C::fwd)  2*B*H*P*(D_qk + D_v), P the (query, key)
--                                pairs of one sequence and head: Lq*Lk unmasked (= 4*B*H*Lq*Lk*D); causal, the
--                                mask's area: Lq = Lk Lq^2/2 (FlashAttention's and TraceLens's half); Lq != Lk
--                                bottom-right (flash-attn family: Lq*Lk - Lq^2/2 when Lq <= Lk, else Lk^2/2, as
--                                FlashAttention-3's hopper/benchmark_attn.py counts) or top-left (SDPA is_causal,
--                                efficient custom_mask_type 1: min(Lq, Lk)^2/2 + Lk*max(Lq - Lk, 0)); backward
--                                2.5x the forward (5 matmuls to the forward's 2: dQ, dK, dV, dP and the
--                                recomputed scores, as FlashAttention counts them). The causal flag comes from
--                                `Concrete Inputs`; without it the FLOPs are NULL (never guessed).
--   sliding window / local (window_size_left / right: flash-attn 2 and 3, aten::_flash_attention_*, aiter,
--                                vLLM)  2*B*H*P*(D_qk + D_v) (backward 2.5x), P = sum_i #keys of query i in
--                                [i + Lk - Lq - left, i + Lk - Lq + right] within [0, Lk) (flash-attn README),
--                                exactly, in closed form (as FlashAttention-3's benchmark counts a window); mask as
--                                flash-attn builds it (csrc/flash_attn/flash_api.cpp): a side >= Lk, < 0 or not
--                                recorded is unbounded, causal sets right = 0, one query (Lq = 1) is not causal,
--                                (unbounded, 0) is the causal mask above
--   varlen attention (cu_seqlens given; q [T, H, D] or [1, T, H, D]; flash_attn varlen, aiter mha_varlen_* /
--                                fmha_v3_varlen_*, _vllm_fa2_C::varlen_fwd, flash-attn 3 with cu_seqlens_q)
--                                2 * sum_i P_i * H * (D_qk + D_v), P_i as above per sequence: only cu_seqlens' shape
--                                [B + 1], T and max_seqlen are recorded, so it is known only when T = B *
--                                max_seqlen for q and k (every sequence max_seqlen long: B * P(max_q, max_k));
--                                otherwise NULL, never estimated; NULL too when seqused_k / block_table /
--                                page_table / leftpad_k / kv_batch_idx / padded cu_seqlens give the lengths
--   paged attention (aiter::mha_batch_prefill, vllm::unified_attention*, _vllm_fa2_C::fwd_kvcache)  NULL: KV
--                                lengths unrecorded
--   attention sinks (aiter sink_size > 0), attention_chunk > 0, appended k_new / v_new, qv, context-parallel KV
--                                NULL: keys per query not modeled
--   custom GEMMs (table cgemm: aiter::gemm_a16w16 / gemm_a8w8*, vllm::rocm_unquantized_gemm,
--                                _C::cutlass_scaled_mm)  2*M*N*K (+ M*N bias); other vllm/aiter/sglang/_C/
--                                flash_attn ops GEMM or attention by name: rows with NULL FLOPs
--   fused MoE (vllm::moe_forward*)  NULL: it records only the hidden states [T, K] and the router logits
--                                [T, E]; top_k, the expert weights and the routing are elsewhere. A row still, kind
--                                'gemm', so MFU counts its time as time of unknown FLOPs
--   A shape the formula cannot read (missing operand, nested lists) gives NULL; flops_unknown says why.
-- bytes = (sum of input tensor elements x their element size) + output elements x the first input's
--   element size (Input type: BFloat16/Half 2, Float8 1, float 4, double 8; attention backward: the
--   outputs dq, dk, dv as q, k, v; an output passed in as an argument, out or dq / dk / dv, is an input
--   already and counts once); NULL when an input tensor's type is unknown, and for
--   aten::_scaled_mm (its output dtype is an argument not recorded as a type) and
--   aten::convolution_backward.
-- Kernels: those launched (cuda_api, same thread) inside the op's span (its whole subtree, as
--   TraceLens's per-op kernel time); kernels = 0 and kernel_ns NULL when none (a CUDA-graph capture
--   records the ops but runs nothing).
-- Columns:
--   rank INTEGER, tid BIGINT, start_ns, end_ns BIGINT ns   the op's host span
--   op VARCHAR                 e.g. aten::mm, aten::_flash_attention_forward
--   external_id BIGINT         Kineto "External id" (= the kernels')
--   kind VARCHAR               'gemm' | 'conv' | 'attention'
--   input_dims BIGINT[][]      `Input Dims` (NULL when not a list of lists)
--   input_types VARCHAR[]      `Input type`
--   dtype VARCHAR              the first input's type, e.g. c10::BFloat16, float
--   batch, m, n, k BIGINT      GEMM sizes (batch 1 for mm/addmm/linear); NULL for conv/attention
--   causal BOOLEAN             attention: the causal flag (NULL when unknown or not attention)
--   flops DOUBLE               the op's FLOPs (NULL: the shapes do not say)
--   bytes DOUBLE byte          input + output tensor bytes (NULL: unknown)
--   intensity DOUBLE           flops / bytes (FLOP/byte)
--   kernels BIGINT             kernels the op launched
--   kernel_ns BIGINT ns        their summed duration
--   first_kernel_ns, last_kernel_end_ns BIGINT ns   first kernel start, last kernel end (GPU timeline)
--   tflops_per_s DOUBLE        achieved: flops / kernel_ns (TFLOP/s); NULL without kernels or flops
--   flops_unknown VARCHAR      why flops is NULL (NULL when known), e.g. 'custom op: argument layout not
--                              known', 'varlen attention: per-sequence lengths not recorded ...'
--   shape_source VARCHAR       'kineto record_shapes' | 'emit_nvtx' (nsys --pytorch=autograd-shapes-nvtx
--                              or emit_nvtx(record_shapes=True): the NVTX range's `sizes = [[...]]`; no
--                              types or scalar arguments, so GEMM FLOPs only: bytes, dtype, attention
--                              and convolution FLOPs unknown)
-- columns: rank, tid, start_ns, end_ns, op, external_id, kind, input_dims, input_types, dtype, batch, m, n, k, causal, flops, bytes, intensity, kernels, kernel_ns, first_kernel_ns, last_kernel_end_ns, tflops_per_s, shape_source, flops_unknown
-- stage: rank
-- result: stored
-- requires: kineto_op_shapes, nvtx, _op_launches
CREATE OR REPLACE VIEW op_flops AS
WITH src AS (
    SELECT rank, tid, start_ns, end_ns, name AS op, external_id,
        from_json(input_dims, '[["BIGINT"]]') AS dims,
        from_json(input_types, '["VARCHAR"]') AS types,
        from_json(concrete_inputs, '["VARCHAR"]') AS conc,
        'kineto record_shapes' AS shape_source
    FROM kineto_op_shapes
    WHERE regexp_matches(name, '^aten::(mm|addmm|bmm|baddbmm|matmul|linear|_scaled_mm|conv[123]d|convolution|_convolution|convolution_backward|cudnn_convolution|miopen_convolution|(cudnn|miopen)_convolution_transpose|conv_transpose[123]d|scaled_dot_product_attention|_scaled_dot_product_(flash|efficient|cudnn)_attention(_backward)?|_(flash|efficient)_attention_(forward|backward))$')
        OR regexp_matches(name, '^(vllm|aiter|sglang|sgl_kernel|_C|_rocm_C|flash_attn|flash_attn_3)::[A-Za-z0-9_]*(gemm|_mm|matmul|attention|attn|mha|moe_forward)|^_vllm_fa[23]_C::[A-Za-z0-9_]*fwd')
    UNION ALL
    -- nsys --pytorch=autograd-shapes-nvtx / emit_nvtx(record_shapes=True): 'aten::mm, seq = 3,
    -- op_id = 7, sizes = [[128, 256], [256, 512]], input_op_ids = [...]' (no types, no scalars)
    SELECT rank, tid, start_ns, end_ns, op, NULL::BIGINT AS external_id,
        from_json(regexp_extract(text, 'sizes = (\[.*?\])(, input_op_ids = |$)', 1), '[["BIGINT"]]') AS dims,
        NULL::VARCHAR[] AS types, NULL::VARCHAR[] AS conc, 'emit_nvtx' AS shape_source
    FROM (SELECT *, regexp_extract(text, '^([^,]+)', 1) AS op FROM nvtx WHERE contains(text, ', sizes = ['))
    WHERE regexp_matches(op, '^aten::(mm|addmm|bmm|baddbmm|matmul|linear|_scaled_mm|conv[123]d|convolution|_convolution|convolution_backward|cudnn_convolution|miopen_convolution|(cudnn|miopen)_convolution_transpose|conv_transpose[123]d|scaled_dot_product_attention|_scaled_dot_product_(flash|efficient|cudnn)_attention(_backward)?|_(flash|efficient)_attention_(forward|backward))$')
        OR regexp_matches(op, '^(vllm|aiter|sglang|sgl_kernel|_C|_rocm_C|flash_attn|flash_attn_3)::[A-Za-z0-9_]*(gemm|_mm|matmul|attention|attn|mha|moe_forward)|^_vllm_fa[23]_C::[A-Za-z0-9_]*fwd')
),
nested AS (  -- ops nest on a thread: the next op in (start, longest first, outer id first) order is
             -- the first child when it lies inside the op
    SELECT *,
        lead(start_ns) OVER w AS next_start, lead(end_ns) OVER w AS next_end
    FROM src
    WINDOW w AS (PARTITION BY rank, tid ORDER BY start_ns, end_ns DESC, external_id)
),
leaf AS (
    SELECT * EXCLUDE (next_start, next_end) FROM nested
    WHERE NOT coalesce(next_start >= start_ns AND next_end <= end_ns, false)
),
-- attention operands: q's position (k, v follow it), layout, the causal flag's position in Concrete
-- Inputs (is_causal, or custom_mask_type for the efficient kernels: mask), the pass (backward: 2.5x),
-- the positions of cu_seqlens_q (cu_seqlens_k next; NULL: no varlen form) and max_seqlen_q
-- (max_seqlen_k next), and those of arguments that, when given, take the KV lengths from elsewhere
-- (sk: seqused_k, seqlen_k, block_table / page_table, leftpad_k, padded cu_seqlens). Layouts: bhld
-- [B, H, L, D]; blhd [B, L, H, D], or varlen [T, H, D] (flash) / [1, T, H, D] (efficient) when
-- cu_seqlens_q is given; thd [T, H, D], always varlen; paged: K and V are a KV-cache pool, the
-- per-sequence KV lengths are not in the shapes. wi: window_size_left's position (window_size_right
-- next; NULL: no window arguments); al: where a causal mask is aligned when Lq != Lk (br: bottom-right,
-- flash-attn's rule; tl: top-left, PyTorch SDPA's is_causal; efficient: custom_mask_type 1 tl, 2 br);
-- nz: arguments the formula does not model, which must be absent or 0 (attention sink tokens,
-- attention_chunk, appended k_new / v_new, qv, context-parallel KV); outi: the position of an output
-- passed in as an argument (out; backward: dq, dk, dv), already among the input bytes when given.
-- Argument positions (0-based, as in the rows below), checked against each signature: aten:
--   aten/src/ATen/native/native_functions.yaml (_flash_attention_forward: ..., is_causal 8, *, scale,
--   window_size_left 11, window_size_right 12, seqused_k 13; _flash_attention_backward: is_causal 11, ...,
--   window_size_left 15; _efficient_attention_forward: custom_mask_type 9, seqlen_k 12, window_size 13);
--   flash-attn 2: Dao-AILab/flash-attention flash_attn/flash_attn_interface.py; flash-attn 3:
--   hopper/flash_attn_interface.py (causal 24, window 25/26, attention_chunk 27); vLLM:
--   vllm-project/flash-attention csrc/flash_attn/flash_api_torch_lib.cpp (_vllm_fa2_C::varlen_fwd: out 3,
--   cu_seqlens 4/5, seqused_k 6, leftpad_k 7, block_table 8, max_seqlen 10/11, is_causal 15, window 16/17;
--   fwd_kvcache: is_causal 14) and hopper/flash_api_torch_lib.cpp (_vllm_fa3_C::fwd: flash-attn 3's
--   positions to window 26, then softcap, ..., cp_tot_seqused_k 36); aiter: ROCm/aiter aiter/ops/mha.py
--   (mha_fwd / fmha_v3_fwd, mha_varlen_fwd / fmha_v3_varlen_fwd, mha_bwd / fmha_v3_bwd, mha_varlen_bwd /
--   fmha_v3_varlen_bwd). Another version's argument list is caught where it matters: a causal flag that is
--   not True / False (or 0/1/2) where the row expects it leaves the FLOPs unknown.
attn(op, qi, layout, ci, mask, factor, cu, mx, sk, wi, al, nz, outi) AS (VALUES
    ('aten::scaled_dot_product_attention', 0, 'bhld', 5, false, 1.0, NULL, NULL, NULL::INTEGER[], NULL, 'tl', NULL::INTEGER[], NULL),
    ('aten::_scaled_dot_product_flash_attention', 0, 'bhld', 4, false, 1.0, NULL, NULL, NULL, NULL, 'tl', NULL, NULL),
    ('aten::_scaled_dot_product_efficient_attention', 0, 'bhld', 6, false, 1.0, NULL, NULL, NULL, NULL, 'tl', NULL, NULL),
    ('aten::_scaled_dot_product_cudnn_attention', 0, 'bhld', 6, false, 1.0, NULL, NULL, NULL, NULL, 'tl', NULL, NULL),
    ('aten::_flash_attention_forward', 0, 'blhd', 8, false, 1.0, 3, 5, [13], 11, 'br', NULL, NULL),
    ('aten::_efficient_attention_forward', 0, 'blhd', 9, true, 1.0, 4, 6, [12], NULL, 'tl', [13], NULL),
    ('aten::_scaled_dot_product_flash_attention_backward', 1, 'bhld', 11, false, 2.5, NULL, NULL, NULL, NULL, 'tl', NULL, NULL),
    ('aten::_scaled_dot_product_efficient_attention_backward', 1, 'bhld', 11, false, 2.5, NULL, NULL, NULL, NULL, 'tl', NULL, NULL),
    ('aten::_scaled_dot_product_cudnn_attention_backward', 1, 'bhld', 14, false, 2.5, NULL, NULL, NULL, NULL, 'tl', NULL, NULL),
    ('aten::_flash_attention_backward', 1, 'blhd', 11, false, 2.5, 6, 8, NULL, 15, 'br', NULL, NULL),
    ('aten::_efficient_attention_backward', 1, 'blhd', 14, true, 2.5, 6, 8, NULL, NULL, 'tl', NULL, NULL),
    -- flash-attn 2 (flash_attn_interface.py: flash_attn_func, flash_attn_varlen_func)
    ('flash_attn::_flash_attn_forward', 0, 'blhd', 5, false, 1.0, NULL, NULL, NULL, 6, 'br', NULL, NULL),
    ('flash_attn::_flash_attn_backward', 1, 'blhd', 11, false, 2.5, NULL, NULL, NULL, 12, 'br', NULL, 6),
    ('flash_attn::_flash_attn_varlen_forward', 0, 'thd', 9, false, 1.0, 3, 5, [15, 16, 17], 10, 'br', NULL, NULL),
    ('flash_attn::_flash_attn_varlen_backward', 1, 'thd', 15, false, 2.5, 9, 11, NULL, 16, 'br', NULL, 6),
    -- flash-attn 3 and vLLM's builds of flash-attn 2 / 3
    ('flash_attn_3::_flash_attn_forward', 0, 'blhd', 24, false, 1.0, 7, 12, [10, 11, 14, 15, 16], 25, 'br', [3, 4, 5, 27], 6),
    ('_vllm_fa3_C::fwd', 0, 'blhd', 24, false, 1.0, 7, 12, [10, 11, 14, 15, 16], 25, 'br', [3, 4, 5, 36], 6),
    ('_vllm_fa2_C::varlen_fwd', 0, 'thd', 15, false, 1.0, 4, 10, [6, 7, 8], 16, 'br', NULL, 3),
    -- aiter (ROCm): CK / asm flash attention, batch [B, L, H, D] and varlen [T, H, D]
    ('aiter::mha_fwd', 0, 'blhd', 5, false, 1.0, 11, NULL, NULL, 6, 'br', [8], 13),
    ('aiter::fmha_v3_fwd', 0, 'blhd', 5, false, 1.0, NULL, NULL, NULL, 6, 'br', NULL, 11),
    ('aiter::mha_varlen_fwd', 0, 'thd', 12, false, 1.0, 3, 5, [19, 26, 27], 13, 'br', [15], 18),
    ('aiter::fmha_v3_varlen_fwd', 0, 'thd', 12, false, 1.0, 3, 5, [19, 26, 27], 13, 'br', NULL, 18),
    ('aiter::mha_bwd', 1, 'blhd', 8, false, 2.5, NULL, NULL, NULL, 9, 'br', NULL, 12),
    ('aiter::fmha_v3_bwd', 1, 'blhd', 8, false, 2.5, NULL, NULL, NULL, 9, 'br', NULL, 14),
    ('aiter::mha_varlen_bwd', 1, 'thd', 13, false, 2.5, 6, 8, [23, 24], 14, 'br', NULL, 17),
    ('aiter::fmha_v3_varlen_bwd', 1, 'thd', 13, false, 2.5, 6, 8, [25, 26], 14, 'br', NULL, 19),
    -- paged: aiter (sglang) batch prefill over the KV pool, vLLM's attention over its KV cache
    ('aiter::mha_batch_prefill', 0, 'paged', 12, false, 1.0, 3, 6, NULL, NULL, 'br', NULL, NULL),
    ('vllm::unified_attention_with_output', 0, 'paged', NULL, false, 1.0, NULL, NULL, NULL, NULL, 'br', NULL, NULL),
    ('vllm::unified_attention', 0, 'paged', NULL, false, 1.0, NULL, NULL, NULL, NULL, 'br', NULL, NULL),
    ('_vllm_fa2_C::fwd_kvcache', 0, 'paged', 14, false, 1.0, NULL, NULL, NULL, NULL, 'br', NULL, NULL)
),
-- convolution: positions in Concrete Inputs of stride, padding, dilation, transposed (NULL: not an
-- argument), output_padding and groups; tr: always transposed (true), never (false), or from `ti`
convs(op, si, pi, di, ti, oi, gi, tr) AS (VALUES
    ('aten::conv1d', 3, 4, 5, NULL, NULL, 6, false), ('aten::conv2d', 3, 4, 5, NULL, NULL, 6, false),
    ('aten::conv3d', 3, 4, 5, NULL, NULL, 6, false),
    ('aten::convolution', 3, 4, 5, 6, 7, 8, NULL), ('aten::_convolution', 3, 4, 5, 6, 7, 8, NULL),
    ('aten::cudnn_convolution', 3, 2, 4, NULL, NULL, 5, false),
    ('aten::miopen_convolution', 4, 3, 5, NULL, NULL, 6, false),
    ('aten::conv_transpose1d', 3, 4, 7, NULL, 5, 6, true), ('aten::conv_transpose2d', 3, 4, 7, NULL, 5, 6, true),
    ('aten::conv_transpose3d', 3, 4, 7, NULL, 5, 6, true),
    ('aten::cudnn_convolution_transpose', 4, 2, 5, NULL, 3, 6, true),
    ('aten::miopen_convolution_transpose', 5, 3, 6, NULL, 4, 7, true),
    ('aten::convolution_backward', 4, 5, 6, 7, 8, 9, NULL)
),
-- custom GEMM ops whose argument layout is known: positions of A, B and the bias (NULL: none
-- counted), B's layout (nk: [N, K] as a linear weight, A [..., K]; kn: A [M, K], B [K, N] with the
-- output [M, N] the first argument), and whether the output's type is the first input's (bytes)
cgemm(op, glayout, ai, bi, biasi, same_type) AS (VALUES
    ('aiter::gemm_a16w16', 'nk', 0, 1, 2, true),               -- (A, B, bias, otype, scales...)
    ('vllm::rocm_unquantized_gemm', 'nk', 0, 1, 2, true),      -- (x, weight, bias): F.linear
    ('aiter::gemm_a8w8', 'nk', 0, 1, NULL, false),             -- (XQ, WQ, x_scale, w_scale, ...)
    ('aiter::gemm_a8w8_CK', 'nk', 0, 1, NULL, false),
    ('aiter::gemm_a8w8_blockscale', 'nk', 0, 1, NULL, false),
    ('_C::cutlass_scaled_mm', 'kn', 1, 2, NULL, false)         -- (out, a, b, a_scales, b_scales, bias)
),
typed AS (
    SELECT l.*,
        CASE WHEN a.op IS NOT NULL OR regexp_matches(l.op, '^[^:]+::[A-Za-z0-9_]*(attention|attn|mha)|^_vllm_fa[23]_C::')
                 THEN 'attention'
             WHEN starts_with(l.op, 'aten::') AND contains(l.op, 'conv') THEN 'conv' ELSE 'gemm' END AS kind,
        -- element size of each input, from its type name (NULL when not a tensor type we know)
        list_transform(coalesce(l.types, []), t -> CASE
            WHEN regexp_matches(t, '(?i)float8') THEN 1
            WHEN regexp_matches(t, '(?i)bfloat16|half') THEN 2
            WHEN regexp_matches(t, '(?i)double') THEN 8
            WHEN regexp_matches(t, '(?i)float') THEN 4
            WHEN t IN ('long int', 'long', 'int64_t') THEN 8
            WHEN t IN ('int', 'int32_t') THEN 4
            WHEN t IN ('bool', 'unsigned char', 'signed char') THEN 1 END) AS es,
        -- elements of each input (NULL for a malformed or non-tensor entry; [] is a scalar: 0)
        list_transform(l.dims, d -> CASE WHEN list_bool_or(list_transform(d, x -> x IS NULL)) THEN NULL
                                         WHEN len(d) = 0 THEN 0
                                         ELSE list_product(d) END) AS elems,
        a.qi, a.layout, a.ci, a.mask, a.factor, a.cu, a.mx, a.sk, a.wi, a.al, a.nz, a.outi,
        c.si, c.pi, c.di, c.ti, c.oi, c.gi, c.tr,
        cg.glayout, cg.ai, cg.bi, cg.biasi, cg.same_type,
        -- a custom (non-aten) GEMM whose argument layout this query does not know
        NOT starts_with(l.op, 'aten::') AND cg.op IS NULL AS custom_unknown
    FROM leaf l
    LEFT JOIN attn a ON a.op = l.op
    LEFT JOIN convs c ON c.op = l.op
    LEFT JOIN cgemm cg ON cg.op = l.op
),
-- the inputs' bytes: NULL when a tensor's shape or element size is unknown
sized AS (
    SELECT *,
        CASE WHEN elems IS NULL
                  OR list_bool_or(list_transform(list_zip(elems, es), p -> p[1] IS NULL OR (p[1] > 0 AND p[2] IS NULL)))
             THEN NULL
             ELSE coalesce(list_sum(list_transform(list_zip(elems, es), p -> CASE WHEN p[1] > 0 THEN p[1] * p[2] END)), 0)
        END AS in_bytes
    FROM typed
),
-- GEMM operands: A, B ([..., K, N]; linear and nk: weight [N, K]) and the bias (addmm, baddbmm,
-- linear, custom ops with one); ap: A's position
g AS (
    SELECT *,
        dims[ap] AS a,
        dims[CASE WHEN glayout IS NOT NULL THEN bi + 1
                  WHEN op IN ('aten::addmm', 'aten::baddbmm') THEN 3 ELSE 2 END] AS b,
        CASE WHEN glayout IS NOT NULL THEN dims[biasi + 1]
             WHEN op IN ('aten::addmm', 'aten::baddbmm') THEN dims[1]
             WHEN op = 'aten::linear' THEN dims[3] END AS bias,
        op = 'aten::linear' OR glayout = 'nk' AS lin
    FROM (SELECT *, CASE WHEN glayout IS NOT NULL THEN ai + 1
                         WHEN op IN ('aten::addmm', 'aten::baddbmm') THEN 2 ELSE 1 END AS ap FROM sized)
),
gemm AS (
    SELECT *,
        len(a) >= 2 AND len(b) >= 2 AND NOT list_bool_or(list_transform(a || b, x -> x IS NULL))
            AND NOT custom_unknown
            -- custom ops: a 2-D B, and for kn an output [M, N] that agrees with A and B
            AND (glayout IS NULL OR len(b) = 2)
            AND (glayout IS DISTINCT FROM 'kn' OR (len(a) = 2 AND dims[1] = [a[1], b[2]])) AS ok,
        coalesce(list_product(list_slice(a, 1, len(a) - 2)), 1) AS a_batch,
        coalesce(list_product(list_slice(b, 1, len(b) - 2)), 1) AS b_batch
    FROM g WHERE kind = 'gemm'
),
gemm_sized AS (
    SELECT *,
        CASE WHEN NOT ok THEN NULL
             WHEN lin THEN 1
             WHEN len(b) = 2 OR list_slice(a, 1, len(a) - 2) = list_slice(b, 1, len(b) - 2) OR b_batch = 1
                 THEN a_batch
             WHEN a_batch = 1 THEN b_batch END AS bt,
        CASE WHEN NOT ok THEN NULL
             WHEN lin THEN list_product(list_slice(a, 1, len(a) - 1))
             ELSE a[-2] END AS mm,
        CASE WHEN NOT ok THEN NULL WHEN lin THEN b[1] ELSE b[-1] END AS nn,
        CASE WHEN NOT ok OR a[-1] <> CASE WHEN lin THEN b[-1] ELSE b[-2] END THEN NULL
             ELSE a[-1] END AS kk,
        coalesce(len(bias) > 0, false) AS has_bias
    FROM gemm
),
gemm_rows AS (
    SELECT *,
        2.0 * bt * mm * nn * kk + CASE WHEN has_bias THEN 1.0 * bt * mm * nn ELSE 0 END AS f,
        CASE WHEN op <> 'aten::_scaled_mm' AND coalesce(same_type, true) THEN
            in_bytes + 1.0 * bt * mm * nn * es[ap]
        END AS byt,
        NULL::BOOLEAN AS causal_flag
    FROM gemm_sized
),
-- attention: q, k, v; dense 4-D (bhld, blhd) or varlen (per-sequence lengths, see below)
att AS (
    SELECT *,
        CASE WHEN mask THEN CASE WHEN conc[ci + 1] = '0' THEN false
                                 WHEN regexp_full_match(conc[ci + 1], '[1-9][0-9]*') THEN true END
             ELSE CASE conc[ci + 1] WHEN 'True' THEN true WHEN 'False' THEN false END END AS causal_flag,
        -- efficient attention's custom_mask_type: 1 causal from the top left, 2 from the bottom right
        CASE WHEN mask AND conc[ci + 1] = '2' THEN 'br' ELSE al END AS align,
        -- varlen: a layout that always is, or cu_seqlens_q given (a tensor [B + 1])
        layout IN ('thd', 'paged') OR coalesce(len(dims[cu + 1]) > 0, false) AS varlen,
        dims[cu + 1][1] - 1 AS nseq, dims[cu + 2][1] - 1 AS nseq_k,
        TRY_CAST(conc[mx + 1] AS BIGINT) AS max_q, TRY_CAST(conc[mx + 2] AS BIGINT) AS max_k,
        coalesce(list_bool_or(list_transform(sk, i -> coalesce(len(dims[i + 1]) > 0, false))), false) AS k_elsewhere,
        -- window_size_left / right as given (absent or None: -1, unbounded)
        coalesce(TRY_CAST(conc[wi + 1] AS BIGINT), -1) AS wl_arg, coalesce(TRY_CAST(conc[wi + 2] AS BIGINT), -1) AS wr_arg,
        coalesce(list_bool_or(list_transform(nz, i -> coalesce(len(dims[i + 1]) > 0, false)
            OR coalesce(TRY_CAST(conc[i + 1] AS BIGINT) > 0, false))), false) AS unmodeled,
        coalesce(len(dims[outi + 1]) > 0, false) AS out_given
    FROM (SELECT *, dims[qi + 1] AS q, dims[qi + 2] AS kt, dims[qi + 3] AS v FROM g WHERE kind = 'attention')
),
att_n AS (  -- varlen q, k, v as [T, H, D] (efficient: [1, T, H, D])
    SELECT *,
        CASE WHEN NOT varlen OR layout = 'paged' THEN NULL
             WHEN len(q) = 3 AND len(kt) = 3 AND len(v) = 3 THEN [q, kt, v]
             WHEN layout = 'blhd' AND len(q) = 4 AND len(kt) = 4 AND len(v) = 4 AND q[1] = 1 AND kt[1] = 1
                  AND v[1] = 1 THEN [list_slice(q, 2, 4), list_slice(kt, 2, 4), list_slice(v, 2, 4)]
        END AS thd
    FROM att
),
-- the per-sequence problem: nb sequences of sq queries and sk keys, nh heads, D_qk + D_v. Dense: the
-- 4-D shapes. Varlen: sum_i Lq_i * Lk_i is known only when every sequence is max_seqlen long
-- (T = B * max_seqlen: B lengths <= max_seqlen summing to B * max_seqlen), for q and k
att_dims AS (
    SELECT *,
        CASE WHEN dense THEN q[1] WHEN var_ok THEN nseq END AS nb,
        CASE WHEN dense THEN CASE layout WHEN 'bhld' THEN q[2] ELSE q[3] END WHEN var_ok THEN thd[1][2] END AS nh,
        CASE WHEN dense THEN CASE layout WHEN 'bhld' THEN q[3] ELSE q[2] END WHEN var_ok THEN max_q END AS lq,
        CASE WHEN dense THEN CASE layout WHEN 'bhld' THEN kt[3] ELSE kt[2] END WHEN var_ok THEN max_k END AS lk,
        CASE WHEN dense THEN q[4] + v[4] WHEN var_ok THEN thd[1][3] + thd[3][3] END AS dsum
    FROM (SELECT *,
              NOT varlen AND NOT k_elsewhere AND len(q) = 4 AND len(kt) = 4 AND len(v) = 4
                  AND NOT list_bool_or(list_transform(q || kt || v, x -> x IS NULL)) AS dense,
              thd IS NOT NULL AND NOT k_elsewhere AND nseq >= 1 AND nseq_k = nseq
                  AND thd[1][1] = nseq * max_q AND thd[2][1] = nseq * max_k AND thd[3][1] = thd[2][1]
                  AND NOT list_bool_or(list_transform(thd[1] || thd[2] || thd[3], x -> x IS NULL)) AS var_ok
          FROM att_n)
),
-- the mask as flash-attn applies it (csrc/flash_attn/flash_api.cpp mha_fwd): a window side >= lk is
-- unbounded (-1); one query (lq = 1) is never causal; causal sets the right side to 0. Query i then
-- sees keys [i + lk - lq - wl, i + lk - lq + wr] (flash-attn README). wl < 0, wr = 0 is the causal mask.
att_win AS (
    SELECT *,
        CASE WHEN wl_arg < 0 OR wl_arg >= lk THEN -1 ELSE wl_arg END AS wl,
        CASE WHEN causal_flag AND NOT (align = 'br' AND lq = 1) THEN 0
             WHEN wr_arg < 0 OR wr_arg >= lk THEN -1 ELSE wr_arg END AS wr
    FROM att_dims
),
-- a local window: count the keys exactly. For query i, keys lo(i) = max(0, i + b) .. hi(i) =
-- min(lk - 1, i + a) (a = lk - lq + wr, b = lk - lq - wl; unbounded sides a = lk, b = -lq); only the
-- queries p..pq see any key. sum hi = sum (i + a) - T(a - lk + 1), sum lo = T(b), with
-- T(t) = sum_{i=p..pq} max(0, i + t) = m * (s + t) + m (m - 1) / 2, s = max(p, -t), m = pq - s + 1
att_w1 AS (
    SELECT *, greatest(0, -wa) AS p, least(lq - 1, lk - 1 - wb) AS pq
    FROM (SELECT *, CASE WHEN wr < 0 THEN lk ELSE lk - lq + wr END AS wa,
                    CASE WHEN wl < 0 THEN -lq ELSE lk - lq - wl END AS wb FROM att_win)
),
att_w2 AS (
    SELECT *, greatest(pq - p + 1, 0) AS wn,
        greatest(p, lk - 1 - wa) AS s1, greatest(pq - greatest(p, lk - 1 - wa) + 1, 0) AS m1,
        greatest(p, -wb) AS s2, greatest(pq - greatest(p, -wb) + 1, 0) AS m2
    FROM att_w1
),
att_rows AS (
    SELECT *,
        factor * 2.0 * nb * nh * keys * dsum AS f,
        CASE WHEN layout IN ('bhld', 'blhd', 'thd') AND len(q) = len(kt) AND len(kt) = len(v)
                  AND len(q) IN (3, 4) THEN
            in_bytes + CASE WHEN out_given THEN 0  -- an output passed in is an input already
                            WHEN factor > 1  -- backward: dq, dk, dv as q, k, v
                            THEN 1.0 * elems[qi + 1] * es[qi + 1] + elems[qi + 2] * es[qi + 2]
                                 + elems[qi + 3] * es[qi + 3]
                            ELSE 1.0 * elems[qi + 1] / q[-1] * v[-1] * es[qi + 1] END  -- out: q's shape, v's D
        END AS byt
    FROM (SELECT *,
              -- the (query, key) pairs of one sequence and head
              CASE WHEN causal_flag IS NULL OR unmodeled OR lq IS NULL OR lq < 1 OR lk < 1 THEN NULL
                   -- top-left causal (SDPA): query x sees min(x, lk) keys; area
                   WHEN align = 'tl' THEN CASE WHEN NOT causal_flag THEN 1.0 * lq * lk
                       ELSE 0.5 * least(lq, lk) * least(lq, lk) + 1.0 * lk * (lq - least(lq, lk)) END
                   WHEN wl < 0 AND wr < 0 THEN 1.0 * lq * lk
                   -- bottom-right causal: query x sees clamp(x + lk - lq, 0, lk) keys; area (Lq = Lk: half)
                   WHEN wl < 0 AND wr = 0 THEN CASE WHEN lq <= lk THEN 1.0 * lq * lk - 0.5 * lq * lq
                                                    ELSE 0.5 * lk * lk END
                   WHEN wn = 0 THEN 0.0
                   ELSE 1.0 * wn * (p + wa) + 0.5 * wn * (wn - 1) - (1.0 * m1 * (s1 + wa - lk + 1) + 0.5 * m1 * (m1 - 1))
                        - (1.0 * m2 * (s2 + wb) + 0.5 * m2 * (m2 - 1)) + wn
              END AS keys
          FROM att_w2)
),
-- convolution: input [N, C, spatial...], weight [Cout, Cin/groups, k...] (transposed: [Cin, Cout/groups, k...])
conv AS (
    SELECT *,
        CASE WHEN op = 'aten::convolution_backward' THEN dims[2] ELSE dims[1] END AS x,
        dims[3 - (op <> 'aten::convolution_backward')::INT] AS w,
        CASE WHEN op = 'aten::convolution_backward' THEN dims[1] END AS gy,
        CASE WHEN op = 'aten::convolution_backward' THEN conc[11] END AS out_mask,
        -- stride / padding / dilation / output_padding: a list '[2, 2]' or one number for every spatial dim
        list_transform(list_value(si, pi, di, oi), i -> CASE WHEN i IS NULL THEN NULL
            WHEN starts_with(conc[i + 1], '[') THEN TRY_CAST(conc[i + 1] AS BIGINT[])
            ELSE list_transform(range(greatest(len(dims[1]) - 2, 0)), j -> TRY_CAST(conc[i + 1] AS BIGINT)) END)
            AS spd,
        TRY_CAST(conc[gi + 1] AS BIGINT) AS groups,
        CASE WHEN tr IS NOT NULL THEN tr
             WHEN conc[ti + 1] = 'True' THEN true WHEN conc[ti + 1] = 'False' THEN false END AS transposed
    FROM g WHERE kind = 'conv'
),
conv_out AS (
    SELECT *,
        len(x) >= 3 AND len(w) = len(x) AND NOT list_bool_or(list_transform(x || w, v -> v IS NULL)) AS xw_ok,
        CASE WHEN op = 'aten::convolution_backward' THEN list_slice(gy, 3, len(gy))
             WHEN transposed IS NULL OR NOT (len(x) >= 3 AND len(w) = len(x) AND len(spd[1]) = len(x) - 2
                  AND len(spd[2]) = len(x) - 2 AND len(spd[3]) = len(x) - 2) THEN NULL
             WHEN NOT transposed THEN
                 list_transform(range(1, len(x) - 1), i ->
                     (x[i + 2] + 2 * spd[2][i] - spd[3][i] * (w[i + 2] - 1) - 1) // spd[1][i] + 1)
             WHEN len(spd[4]) = len(x) - 2 THEN  -- transposed: (H - 1) s - 2 p + d (k - 1) + output_padding + 1
                 list_transform(range(1, len(x) - 1), i ->
                     (x[i + 2] - 1) * spd[1][i] - 2 * spd[2][i] + spd[3][i] * (w[i + 2] - 1) + spd[4][i] + 1)
        END AS out_sp,
        CASE WHEN op <> 'aten::convolution_backward' THEN 1
             WHEN out_mask IS NULL THEN NULL
             ELSE list_count(list_filter(TRY_CAST(out_mask AS BOOLEAN[])[1:2], v -> v)) END AS grads
    FROM conv
),
conv_rows AS (
    SELECT *,
        -- 2 * N * prod(weight dims) * prod(spatial), spatial: the output's, or the input's for a
        -- transposed convolution (each input element meets Cout/groups * prod(k) weights); the
        -- backward counts the forward's once per gradient
        CASE WHEN NOT xw_ok THEN NULL
             WHEN transposed AND (op <> 'aten::convolution_backward' OR grads IS NOT NULL) THEN
                 2.0 * x[1] * list_product(list_slice(x, 3, len(x))) * list_product(w) * grads
             WHEN NOT list_bool_or(list_transform(out_sp, v -> v IS NULL OR v <= 0)) THEN
                 2.0 * x[1] * list_product(out_sp) * list_product(w) * grads
        END AS f,
        CASE WHEN op <> 'aten::convolution_backward' AND transposed IS NOT NULL
                  AND NOT list_bool_or(list_transform(out_sp, v -> v IS NULL OR v <= 0)) THEN
            in_bytes + 1.0 * x[1] * CASE WHEN transposed THEN w[2] * groups ELSE w[1] END * list_product(out_sp) * es[1]
        END AS byt
    FROM conv_out
),
allrows AS (
    SELECT rank, tid, start_ns, end_ns, op, external_id, kind, dims, types, bt AS batch, mm AS m, nn AS n,
           kk AS k, causal_flag, f, byt, shape_source,
           CASE WHEN f IS NOT NULL THEN NULL
                WHEN custom_unknown AND contains(op, 'moe_forward')
                    THEN 'MoE: expert weights, top_k and routing not among the recorded shapes'
                WHEN custom_unknown THEN 'custom op: argument layout not known'
                ELSE 'shapes not readable (operand missing, 1-D, broadcast, or K disagrees)' END AS why
    FROM gemm_rows
    UNION ALL
    SELECT rank, tid, start_ns, end_ns, op, external_id, kind, dims, types, NULL, NULL, NULL, NULL,
           causal_flag, f, byt, shape_source,
           CASE WHEN f IS NOT NULL THEN NULL
                WHEN layout IS NULL THEN 'custom op: argument layout not known'
                WHEN layout = 'paged' THEN 'paged KV cache: per-sequence KV lengths not recorded'
                WHEN shape_source = 'emit_nvtx' THEN 'emit_nvtx: no scalar arguments (causal flag) recorded'
                WHEN causal_flag IS NULL THEN 'causal flag not recorded (Concrete Inputs)'
                WHEN unmodeled THEN 'attention sinks, chunked attention or appended KV (sink_size, attention_chunk, k_new, qv): keys per query not modeled'
                WHEN varlen AND k_elsewhere THEN 'varlen attention: KV lengths from seqused_k / block_table, not recorded'
                WHEN k_elsewhere THEN 'KV lengths from seqused_k / page_table / kv_batch_idx, not recorded'
                WHEN varlen THEN 'varlen attention: per-sequence lengths not recorded (only total tokens and max seqlen)'
                ELSE 'shapes not readable' END
    FROM att_rows
    UNION ALL
    SELECT rank, tid, start_ns, end_ns, op, external_id, kind, dims, types, NULL, NULL, NULL, NULL,
           NULL, f, byt, shape_source,
           CASE WHEN f IS NOT NULL THEN NULL
                WHEN shape_source = 'emit_nvtx' THEN 'emit_nvtx: no scalar arguments (stride, padding) recorded'
                WHEN op = 'aten::convolution_backward' AND grads IS NULL THEN 'output_mask not recorded (Concrete Inputs)'
                WHEN transposed IS NULL THEN 'transposed flag not recorded (Concrete Inputs)'
                WHEN xw_ok AND NOT transposed AND out_sp IS NULL THEN 'stride / padding / dilation not recorded'
                ELSE 'shapes not readable' END
    FROM conv_rows
),
launch AS (  -- kernels launched on the threads of the rank's leaf ops
    SELECT rank, tid, launch_ns, start_ns, end_ns FROM _op_launches
    WHERE kernel AND launched AND rank IN (SELECT DISTINCT rank FROM leaf)
),
placed AS (  -- leaf ops do not overlap on a thread: the last one starting before the launch
    SELECT o.rank, o.tid, o.start_ns AS op_start, o.external_id, l.start_ns, l.end_ns
    FROM launch l ASOF JOIN leaf o ON o.rank = l.rank AND o.tid = l.tid AND l.launch_ns >= o.start_ns
    WHERE l.launch_ns <= o.end_ns
),
kern AS (
    SELECT rank, tid, op_start, external_id, count(*) AS kernels, sum(end_ns - start_ns) AS kernel_ns,
        min(start_ns) AS first_kernel_ns, max(end_ns) AS last_kernel_end_ns
    FROM placed GROUP BY ALL
)
SELECT r.rank, r.tid, r.start_ns, r.end_ns, r.op, r.external_id, r.kind, r.dims AS input_dims,
    r.types AS input_types, r.types[1] AS dtype, r.batch::BIGINT AS batch, r.m::BIGINT AS m,
    r.n::BIGINT AS n, r.k::BIGINT AS k, r.causal_flag AS causal, r.f::DOUBLE AS flops,
    r.byt::DOUBLE AS bytes, (r.f / nullif(r.byt, 0))::DOUBLE AS intensity,
    coalesce(k.kernels, 0) AS kernels, k.kernel_ns::BIGINT AS kernel_ns, k.first_kernel_ns,
    k.last_kernel_end_ns, (r.f / nullif(k.kernel_ns, 0) / 1e3)::DOUBLE AS tflops_per_s,
    r.shape_source, r.why AS flops_unknown
FROM allrows r
LEFT JOIN kern k ON k.rank = r.rank AND k.tid = r.tid AND k.op_start = r.start_ns
    AND k.external_id IS NOT DISTINCT FROM r.external_id;
