-- kernel_chains: runs of consecutive kernels on one stream that a fused kernel could replace.
-- Why: eager frameworks launch one kernel per elementwise/normalisation op, each a round trip
--   through GPU memory; attention written as bmm -> softmax -> bmm writes the n x n score matrix to
--   memory instead of keeping it on chip (FlashAttention / SDPA). Both show on the timeline as a
--   recognisable sequence of kernel classes on one stream (docs/diagnose.md `fusion-candidates`,
--   `unfused-attention`).
-- Columns:
--   rank INTEGER, device_id INTEGER, stream_id BIGINT   where the chain ran
--   step BIGINT                 the step window (`steps`) holding the chain's first kernel; NULL:
--                               the whole-capture window
--   in_window BOOLEAN           the first kernel lies inside a window (chains outside every window,
--                               e.g. initialisation before the first step, count in no per-step number)
--   kind VARCHAR                'fusion' | 'attention'
--   start_ns, end_ns BIGINT ns  start of the first, end of the last kernel (span = end - start)
--   kernels BIGINT              kernels in the chain
--   busy_ns BIGINT ns           summed kernel durations
--   max_kernel_ns BIGINT ns     the longest kernel of the chain
--   gemm_ns BIGINT ns           attention: the two GEMMs' durations (0 for fusion)
--   graph_kernels BIGINT        kernels replayed from a CUDA graph
--   first_name, softmax_name VARCHAR   the chain's first kernel; attention: its softmax kernel
--   softmax_correlation_id BIGINT   attention: the softmax kernel's correlation id (its launch call)
--   softmax_elem_bytes INTEGER      attention: element size of the softmax's data type from its name
--                               (BFloat16/Half 2, float 4, double 8; NULL when the name has none)
--   names VARCHAR[]             short names of the first 12 kernels, in order
-- Definition:
--   fusion: a maximal run of kernels of category memory and subcategory elementwise, norm, softmax,
--     reduction, random, loss, pooling or quantize on one (rank, device, stream), ordered by start,
--     each starting at most 5 us after the previous one ended (a longer gap is host/launch time,
--     the CUDA-graph candidates' subject, not fusion's). Already-fused kernels (subcategory fused,
--     optimizer: multi_tensor_apply, Triton/nvFuser fusions) break a run. Runs of >= 2 kernels are
--     kept; diagnose's `fusion_min_kernels` picks the candidates.
--   attention: on one stream, the kernels that are not "filler" (memory kernels of subcategory
--     elementwise, random or copy: scaling, masking, dropout, contiguous copies) in order; a
--     softmax kernel (subcategory softmax, not a log-softmax: that is the loss) whose previous and
--     next non-filler kernels are GEMMs (subcategory gemm) is an unfused attention: QK^T, softmax,
--     PV forward, or the matching backward. The chain spans both GEMMs and the fillers between.
-- columns: rank, device_id, stream_id, step, in_window, kind, start_ns, end_ns, kernels, busy_ns, max_kernel_ns, gemm_ns, graph_kernels, first_name, softmax_name, softmax_correlation_id, softmax_elem_bytes, names
-- stage: rank
-- result: stored
-- requires: kernels, steps
CREATE OR REPLACE VIEW kernel_chains AS
-- The windows carry as few strings as they can (strings make DuckDB's window sort several times
-- slower): the short name, the full name only where there is no short one; names are put
-- together after the runs are found.
WITH kb AS (  -- the per-kernel values first: a window sorts every column its query reads
    SELECT rank, device_id, stream_id, start_ns, end_ns, end_ns - start_ns AS d,
           short_name, CASE WHEN short_name IS NULL THEN name END AS long_name, graph_node_id,
           category = 'memory' AND subcategory IN
               ('elementwise', 'norm', 'softmax', 'reduction', 'random', 'loss', 'pooling', 'quantize')
               AS fusible,
           CASE WHEN subcategory = 'gemm' THEN 'gemm'
                WHEN subcategory = 'softmax' AND NOT regexp_matches(name, '(?i)log_?softmax') THEN 'softmax'
                WHEN category = 'memory' AND subcategory IN ('elementwise', 'random', 'copy') THEN 'filler'
                ELSE 'other' END AS role,
           CASE WHEN subcategory <> 'softmax' THEN NULL
                WHEN regexp_matches(name, 'BFloat16|c10::Half|__half|bfloat16') THEN 2
                WHEN regexp_matches(name, 'double') THEN 8
                WHEN regexp_matches(name, 'float') THEN 4 END AS elem_bytes,
           correlation_id
    FROM kernels
),
k AS MATERIALIZED (
    SELECT *, row_number() OVER s AS rn, start_ns - lag(end_ns) OVER s AS gap_ns,
           lag(fusible) OVER s AS prev_fusible
    FROM kb
    WINDOW s AS (PARTITION BY rank, device_id, stream_id ORDER BY start_ns, end_ns)
),
linked AS (  -- a fusible kernel continues the run of the one before it, on its stream
    SELECT *, coalesce(fusible AND prev_fusible AND gap_ns <= 5000, false) AS cont
    FROM k
),
paired AS (  -- only kernels of runs of two or more: the others (most kernels) are not chains
    SELECT *
    FROM (SELECT *, lead(cont) OVER (PARTITION BY rank, device_id, stream_id ORDER BY rn) AS next_cont
          FROM linked WHERE fusible)
    WHERE cont OR coalesce(next_cont, false)
),
runs AS (
    SELECT *, sum(CASE WHEN cont THEN 0 ELSE 1 END)
                  OVER (PARTITION BY rank, device_id, stream_id ORDER BY rn ROWS UNBOUNDED PRECEDING)
              AS run_no
    FROM paired
),
fusion AS (  -- names: a sorted list of (rn, name) pairs; `list(... ORDER BY rn)` costs twice as much
    SELECT rank, device_id, stream_id, 'fusion' AS kind, min(start_ns) AS start_ns,
           max(end_ns) AS end_ns, count(*) AS kernels, sum(d) AS busy_ns, max(d) AS max_kernel_ns,
           0::BIGINT AS gemm_ns, count(graph_node_id) AS graph_kernels,
           arg_min(coalesce(short_name, long_name), rn) AS first_name,
           NULL::VARCHAR AS softmax_name, NULL::BIGINT AS softmax_correlation_id,
           NULL::INTEGER AS softmax_elem_bytes,
           list_transform(list_sort(list(struct_pack(r := rn, s := coalesce(short_name, long_name))))[1:12],
                          x -> x.s) AS names
    FROM runs WHERE fusible
    GROUP BY rank, device_id, stream_id, run_no
    HAVING count(*) >= 2
),
nf AS (  -- non-filler kernels with their neighbours in that sequence
    SELECT rank, device_id, stream_id, rn, role, start_ns, end_ns, d, correlation_id, elem_bytes,
           lag(role) OVER n AS prev_role, lead(role) OVER n AS next_role,
           lag(rn) OVER n AS prev_rn, lead(rn) OVER n AS next_rn,
           lag(start_ns) OVER n AS prev_start, lead(end_ns) OVER n AS next_end,
           lag(d) OVER n AS prev_d, lead(d) OVER n AS next_d
    FROM k WHERE role <> 'filler'
    WINDOW n AS (PARTITION BY rank, device_id, stream_id ORDER BY rn)
),
attn AS (
    SELECT a.rank, a.device_id, a.stream_id, 'attention' AS kind, a.prev_start AS start_ns,
           a.next_end AS end_ns, a.next_rn - a.prev_rn + 1 AS kernels, sum(k.d) AS busy_ns,
           max(k.d) AS max_kernel_ns, a.prev_d + a.next_d AS gemm_ns,
           count(k.graph_node_id) AS graph_kernels,
           arg_min(coalesce(k.short_name, k.long_name), k.rn) AS first_name,  -- the first GEMM
           any_value(coalesce(k.short_name, k.long_name)) FILTER (WHERE k.rn = a.rn) AS softmax_name,
           a.correlation_id AS softmax_correlation_id, a.elem_bytes AS softmax_elem_bytes,
           list_transform(list_sort(list(struct_pack(r := k.rn, s := coalesce(k.short_name, k.long_name))))[1:12],
                          x -> x.s) AS names
    FROM nf a
    JOIN k ON k.rank = a.rank AND k.device_id IS NOT DISTINCT FROM a.device_id
          AND k.stream_id IS NOT DISTINCT FROM a.stream_id AND k.rn BETWEEN a.prev_rn AND a.next_rn
    WHERE a.role = 'softmax' AND a.prev_role = 'gemm' AND a.next_role = 'gemm'
    GROUP BY ALL
),
chains AS (SELECT * FROM fusion UNION ALL SELECT * FROM attn)
SELECT c.rank, c.device_id, c.stream_id, CASE WHEN c.start_ns < w.end_ns THEN w.step END AS step,
       coalesce(c.start_ns < w.end_ns, false) AS in_window, c.kind, c.start_ns::BIGINT AS start_ns,
       c.end_ns::BIGINT AS end_ns, c.kernels::BIGINT AS kernels, c.busy_ns::BIGINT AS busy_ns,
       c.max_kernel_ns::BIGINT AS max_kernel_ns, c.gemm_ns::BIGINT AS gemm_ns,
       c.graph_kernels::BIGINT AS graph_kernels, c.first_name, c.softmax_name,
       c.softmax_correlation_id::BIGINT AS softmax_correlation_id,
       c.softmax_elem_bytes::INTEGER AS softmax_elem_bytes, c.names
FROM chains c
ASOF LEFT JOIN steps w ON w.rank = c.rank AND w.start_ns <= c.start_ns;
