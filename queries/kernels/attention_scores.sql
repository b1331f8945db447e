-- attention_scores: the score matrix each unfused attention materialises, from the softmax's input shape.
-- Why: attention written as bmm -> softmax -> bmm (kernel_chains kind 'attention') writes the
--   b x h x n x n score matrix to GPU memory (and keeps it for backward); its size against the
--   GPU's memory says how much a fused kernel (FlashAttention / SDPA) frees, and whether a longer
--   sequence fits at all. The kernels carry no shapes; the op that launched the softmax does.
-- Shape sources, per softmax kernel of an attention chain (its launch: cuda_api of the kernel's
--   correlation id, same rank):
--   'kineto record_shapes'  PyTorch-profiler traces recorded with record_shapes=True: the innermost
--                          softmax op (kineto_op_shapes) on the launch's thread whose span holds the
--                          launch (the op whose "External id" the kernel carries); its first
--                          `Input Dims` list, element size from its first `Input type`;
--   'emit_nvtx'            nsys traces of torch.autograd.profiler.emit_nvtx(record_shapes=True):
--                          the innermost `aten::*softmax*` NVTX range around the launch, its first
--                          `sizes = [[...]]` list, element size from the softmax kernel's name.
--   A softmax without either has no row (the finding says how to record shapes).
-- Columns:
--   rank, step, in_window              the chain (kernel_chains)
--   correlation_id                     the softmax kernel's
--   op                                 the op, e.g. aten::_softmax, aten::_softmax_backward_data
--   dims BIGINT[]                      the softmax input's shape (b, h, n, n)
--   elem_bytes   byte                  element size (BFloat16/Half 2, float 4, double 8)
--   score_bytes  byte                  product(dims) * elem_bytes
--   shape_source                       'kineto record_shapes' | 'emit_nvtx'
--   gpu_memory_bytes byte              the rank's GPU memory (gpus.memory_bytes; NULL when not recorded)
--   pct_of_gpu_memory %                100 * score_bytes / gpu_memory_bytes
--   peak_bytes_in_use byte             the rank's peak allocated memory (memory_peak; NULL without
--                                      memory events)
-- columns: rank, step, in_window, correlation_id, op, dims, elem_bytes, score_bytes, shape_source, gpu_memory_bytes, pct_of_gpu_memory, peak_bytes_in_use
-- stage: rank
-- result: stored
-- requires: kernel_chains, cuda_api, nvtx, kineto_op_shapes, gpus, ranks, memory_peak
CREATE OR REPLACE VIEW attention_scores AS
WITH s AS (
    SELECT rank, step, in_window, softmax_correlation_id AS corr, softmax_elem_bytes AS name_elem
    FROM kernel_chains WHERE kind = 'attention' AND softmax_correlation_id IS NOT NULL
),
l AS (
    SELECT s.*, a.start_ns AS launch_ns, a.tid
    FROM s JOIN cuda_api a ON a.rank = s.rank AND a.correlation_id = s.corr
),
kin AS (  -- Kineto: the innermost softmax op around the launch
    SELECT l.rank, l.corr,
        arg_min({'op': o.name, 'dims': o.input_dims, 'types': o.input_types}, o.end_ns - o.start_ns) AS o
    FROM l JOIN kineto_op_shapes o ON o.rank = l.rank AND o.tid = l.tid
        AND o.start_ns <= l.launch_ns AND o.end_ns >= l.launch_ns
    WHERE regexp_matches(o.name, '(?i)softmax')  -- the table also holds matmul/conv/attention ops
    GROUP BY ALL
),
nv AS (  -- emit_nvtx: the innermost aten::*softmax range with sizes around the launch
    SELECT l.rank, l.corr, arg_min(n.text, n.end_ns - n.start_ns) AS text
    FROM l JOIN nvtx n ON n.rank = l.rank AND n.tid = l.tid AND n.start_ns <= l.launch_ns
        AND n.end_ns >= l.launch_ns
    WHERE regexp_matches(n.text, '^aten::_?softmax') AND contains(n.text, 'sizes = [[')
    GROUP BY ALL
),
shaped AS (
    SELECT l.rank, l.step, l.in_window, l.corr,
        coalesce(k.o.op, regexp_extract(v.text, '^([^,]+)', 1)) AS op,
        coalesce(TRY_CAST(json_extract(k.o.dims, '$[0]') AS BIGINT[]),
                 list_transform(string_split(regexp_extract(v.text, 'sizes = \[\[([0-9, ]+)\]', 1), ', '),
                                x -> TRY_CAST(x AS BIGINT))) AS dims,
        coalesce(CASE WHEN k.o.op IS NOT NULL THEN
                     CASE WHEN regexp_matches(json_extract_string(k.o.types, '$[0]'), 'BFloat16|Half') THEN 2
                          WHEN regexp_matches(json_extract_string(k.o.types, '$[0]'), '(?i)double') THEN 8
                          WHEN regexp_matches(json_extract_string(k.o.types, '$[0]'), '(?i)float8') THEN 1
                          WHEN regexp_matches(json_extract_string(k.o.types, '$[0]'), '(?i)float') THEN 4 END
                 END, l.name_elem) AS elem_bytes,
        CASE WHEN k.o.op IS NOT NULL THEN 'kineto record_shapes' WHEN v.text IS NOT NULL THEN 'emit_nvtx' END
            AS shape_source
    FROM l LEFT JOIN kin k ON k.rank = l.rank AND k.corr = l.corr
    LEFT JOIN nv v ON v.rank = l.rank AND v.corr = l.corr
),
mem AS (
    SELECT r.rank, max(g.memory_bytes) AS gpu_memory_bytes
    FROM ranks r JOIN gpus g ON g.rank = r.rank AND g.device_id IS NOT DISTINCT FROM r.device_id
    GROUP BY r.rank
),
peak AS (SELECT rank, max(peak_bytes_in_use) AS peak_bytes_in_use FROM memory_peak GROUP BY rank)
SELECT s.rank, s.step, s.in_window, s.corr AS correlation_id, s.op, s.dims, s.elem_bytes,
    list_reduce(s.dims, (a, b) -> a * b) * s.elem_bytes AS score_bytes,
    s.shape_source, m.gpu_memory_bytes,
    100.0 * list_reduce(s.dims, (a, b) -> a * b) * s.elem_bytes / nullif(m.gpu_memory_bytes, 0) AS pct_of_gpu_memory,
    p.peak_bytes_in_use
FROM shaped s
LEFT JOIN mem m ON m.rank = s.rank
LEFT JOIN peak p ON p.rank = s.rank
WHERE s.shape_source IS NOT NULL AND len(s.dims) >= 2 AND list_bool_and(list_transform(s.dims, x -> x IS NOT NULL));
