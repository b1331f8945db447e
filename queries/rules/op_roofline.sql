-- The statements of the roofline evidence from recorded shapes (nsight_analyze/rules/op_roofline.py).

-- name: rank_peaks
-- One row per rank with its GPU's dense peaks (TFLOP/s) for the op dtypes and its memory
-- bandwidth (GB/s), as a VALUES list ($rows: one "(rank, fp32, tf32, bf16, fp16, fp8, mem_bw_gbs)"
-- tuple per rank, gpus.rank_peak_rows) so the evidence SQL re-runs as is.
SELECT * FROM (VALUES $rows) p(rank, fp32, tf32, bf16, fp16, fp8, mem_bw_gbs)

-- name: no_rank_peaks
-- rank_peaks' columns and no row: no rank has a peak row.
SELECT * FROM (VALUES (NULL::INTEGER, NULL::DOUBLE, NULL::DOUBLE, NULL::DOUBLE, NULL::DOUBLE,
                       NULL::DOUBLE, NULL::DOUBLE)) p(rank, fp32, tf32, bf16, fp16, fp8, mem_bw_gbs)
WHERE false

-- name: precision_by_kernel_name
-- The FP32 / TF32 a float op's longest kernel ($kernel_name) states by its name (gemm_precision).
CASE gemm_precision($kernel_name) WHEN 'tf32' THEN 'tf32' WHEN 'fp32' THEN 'fp32' END

-- name: op_precision
-- The precision whose peak bounds an op: its input dtype ($dtype: bf16, fp16, fp8); float inputs
-- run FP32 or TF32: $by_name (precision_by_kernel_name, or NULL: unknown, never guessed).
CASE WHEN regexp_matches($dtype, '(?i)float8') THEN 'fp8'
WHEN regexp_matches($dtype, '(?i)bfloat16') THEN 'bf16'
WHEN regexp_matches($dtype, '(?i)half') THEN 'fp16'
WHEN $dtype = 'float' THEN $by_name END

-- name: attn_q
-- Over an op_flops row `o`: attention's q; the backward ops list grad_out first.
o.input_dims[CASE WHEN o.op LIKE '%backward' THEN 2 ELSE 1 END]

-- name: attn_blhd
-- Whether q is [B, L, H, D] (aten::_flash/_efficient_attention_*), else [B, H, L, D]
-- (aten::scaled_dot_product_*).
regexp_matches(o.op, '^aten::_(flash|efficient)_attention_')

-- name: is_attn_q
-- An attention op with a 4-d q ($q: attn_q).
o.kind = 'attention' AND len($q) = 4

-- name: attn_dims
-- Attention's B, H, L and D from q ($q: attn_q, $is_q: is_attn_q, $blhd: attn_blhd).
CASE WHEN $is_q THEN $q[1] END AS attn_b,
       CASE WHEN $is_q THEN CASE WHEN $blhd THEN $q[3] ELSE $q[2] END END AS attn_h,
       CASE WHEN $is_q THEN CASE WHEN $blhd THEN $q[2] ELSE $q[3] END END AS attn_l,
       CASE WHEN $is_q THEN $q[4] END AS attn_d

-- name: attainable_tflops
-- The roofline's attainable TFLOP/s of an op group: min(peak, intensity x bandwidth).
least(any_value(peak_tflops), sum(flops) / sum(bytes) * any_value(mem_bw_gbs) / 1e3)

-- name: ops
-- The op_flops ops that launched the kernels of $kernels (columns rank, correlation_id, name,
-- duration_ns), grouped by op, dtype and shape, with the peaks of $peaks (rank_peaks); $attn_dims:
-- attn_dims, $prec: op_precision, $roof: attainable_tflops, $sm_default: sm_count_default,
-- $tile / $k_slice: op_roofline.TILE / K_SLICE. rules/op_roofline.ops_sql says what each column is.
WITH peaks AS ($peaks),
sm AS (SELECT rank, max(sm_count) AS sm FROM gpus GROUP BY rank),
sk AS ($kernels),
ko AS (
    SELECT sk.rank, sk.name, sk.duration_ns, o.tid, o.start_ns, o.op, o.kind, o.dtype,
           o.batch, o.m, o.n, o.k, o.causal, o.flops, o.bytes, o.kernel_ns, $attn_dims
    FROM sk JOIN cuda_api a ON a.rank = sk.rank AND a.correlation_id = sk.correlation_id
    JOIN op_flops o ON o.rank = sk.rank AND o.tid = a.tid
        AND a.start_ns BETWEEN o.start_ns AND o.end_ns
),
ops AS (
    SELECT rank, tid, start_ns, any_value(op) AS op, any_value(kind) AS kind,
           any_value(dtype) AS dtype, any_value(batch) AS batch, any_value(m) AS m,
           any_value(n) AS n, any_value(k) AS k, any_value(attn_b) AS attn_b,
           any_value(attn_h) AS attn_h, any_value(attn_l) AS attn_l, any_value(attn_d) AS attn_d,
           any_value(causal) AS causal, any_value(flops) AS flops, any_value(bytes) AS bytes,
           any_value(kernel_ns) AS op_kernel_ns, count(*) AS launches,
           sum(duration_ns) AS kernel_ns, arg_max(name, (duration_ns, name)) AS kernel,
           $prec AS peak_precision
    FROM ko GROUP BY rank, tid, start_ns
),
pk AS (
    SELECT ops.*, CASE ops.peak_precision WHEN 'fp8' THEN p.fp8 WHEN 'bf16' THEN p.bf16
                      WHEN 'fp16' THEN p.fp16 WHEN 'tf32' THEN p.tf32 WHEN 'fp32' THEN p.fp32 END
               AS peak_tflops, p.mem_bw_gbs,
           coalesce(sm.sm, nullif($sm_default, 0)) AS sm_count
    FROM ops LEFT JOIN peaks p ON p.rank = ops.rank LEFT JOIN sm ON sm.rank = ops.rank
)
SELECT op, kind, dtype, batch, m, n, k, attn_b, attn_h, attn_l, attn_d, causal, peak_precision,
       count(*) AS ops, sum(launches)::BIGINT AS launches, sum(kernel_ns)::BIGINT AS kernel_ns,
       sum(op_kernel_ns)::BIGINT AS op_kernel_ns, any_value(flops) AS flops_per_op,
       round(sum(flops) / sum(op_kernel_ns) / 1e3, 2) AS tflops_per_s,
       any_value(peak_tflops) AS peak_tflops,
       round(100.0 * sum(flops) / sum(op_kernel_ns) / 1e3 / any_value(peak_tflops), 1) AS pct_of_peak,
       round(sum(flops) / sum(bytes), 1) AS intensity,
       round(any_value(peak_tflops) * 1e3 / any_value(mem_bw_gbs), 1) AS ridge_flop_per_byte,
       round($roof, 2) AS attainable_tflops,
       round(100.0 * sum(flops) / sum(op_kernel_ns) / 1e3 / $roof, 1) AS pct_of_roofline,
       CASE WHEN kind = 'gemm' THEN coalesce(batch, 1) * ceil(m / $tile) * ceil(n / $tile)
            END::BIGINT AS tiles_128,
       CASE WHEN kind = 'gemm' THEN coalesce(batch, 1) * ceil(m / $tile) * ceil(n / $tile)
            * ceil(k / $k_slice) END::BIGINT AS split_k_tiles,
       any_value(sm_count) AS sm_count,
       arg_max(kernel, (kernel_ns, kernel)) AS example_kernel,
       list(DISTINCT rank ORDER BY rank) AS ranks
FROM pk GROUP BY op, kind, dtype, batch, m, n, k, attn_b, attn_h, attn_l, attn_d, causal,
         peak_precision, peak_tflops, mem_bw_gbs, sm_count
ORDER BY kernel_ns DESC, op, dtype, batch, m, n, k, attn_b, attn_h, attn_l, attn_d, causal,
         peak_precision, peak_tflops

-- name: any_op_flops
-- Whether op_flops has a row, without counting them all.
SELECT count(*) FROM (FROM op_flops LIMIT 1)
