-- The statements of the `unfused-attention` finding (nsight_analyze/rules/unfused_attention.py).

-- name: score_matrix_largest
-- The largest score matrix of the unfused softmaxes, its rank's GPU memory and where the shapes
-- came from (queries/kernels/attention_scores.sql: Kineto record_shapes or emit_nvtx).
SELECT max(score_bytes) AS s, arg_max(gpu_memory_bytes, score_bytes) AS m,
list(DISTINCT shape_source ORDER BY shape_source) AS src FROM attention_scores WHERE in_window

-- name: score_matrix_shapes
-- Shape of each unfused softmax's input (the b x h x n x n score matrix), its size and its share
-- of the GPU's memory.
SELECT op, dims, elem_bytes, score_bytes, shape_source, count(*) AS softmaxes,
       max(pct_of_gpu_memory) AS pct_of_gpu_memory, max(peak_bytes_in_use) AS peak_bytes_in_use,
       list(DISTINCT rank ORDER BY rank) AS ranks
FROM attention_scores WHERE in_window GROUP BY ALL ORDER BY score_bytes DESC, op

-- name: sequence_gemms
-- The GEMM kernels of the GEMM -> softmax -> GEMM sequences (kernel_chains kind attention), for
-- the shapes of the ops that launched them (op_roofline).
SELECT k.rank, k.correlation_id, k.name, k.duration_ns
FROM kernels k JOIN (SELECT * FROM kernel_chains WHERE kind = 'attention' AND in_window) c
  ON c.rank = k.rank AND c.device_id IS NOT DISTINCT FROM k.device_id
 AND c.stream_id = k.stream_id AND k.start_ns >= c.start_ns AND k.end_ns <= c.end_ns
WHERE k.subcategory = 'gemm'

-- name: recoverable_per_rank_step
-- Per sequence, its span less the two GEMMs: what a fused kernel keeps on chip (rules/_chains.py
-- sums it per rank and step).
SELECT rank, step, (end_ns - start_ns) - gemm_ns AS v FROM kernel_chains
WHERE kind = 'attention' AND in_window

-- name: sequence_totals
-- The sequences, their span, GEMM time and kernels over the job.
SELECT count(*) AS chains, sum(end_ns - start_ns) AS span_ns, sum(gemm_ns) AS gemm_ns,
       sum(kernels) AS kernels FROM kernel_chains WHERE kind = 'attention' AND in_window

-- name: fused_attention_ns
-- Kernel time already in fused attention kernels (flash / SDPA), over the job.
SELECT coalesce(sum(total_ns), 0) FROM kernel_summary WHERE subcategory = 'attention'

-- name: sequences_by_softmax
-- The sequences grouped by their softmax kernel and length, with what fusing each saves.
SELECT softmax_name, kernels, count(*) AS sequences, list(DISTINCT rank ORDER BY rank)
       AS ranks, sum(end_ns - start_ns) AS span_ns, sum(gemm_ns) AS gemm_ns,
       sum(end_ns - start_ns - gemm_ns) AS recoverable_ns,
       arg_max(names, (end_ns - start_ns - gemm_ns, names)) AS example
FROM kernel_chains WHERE kind = 'attention' AND in_window
GROUP BY softmax_name, kernels ORDER BY recoverable_ns DESC, softmax_name
