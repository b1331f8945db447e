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
--   graph_kernels BIGINT        kernels replayed from a CUDA/HIP graph (graph node, or launched by a
--                               graph launch call: _graph_launched)
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
-- requires: kernels, steps, _interval_buckets, _bucket_of, _kernel_names, _graph_launched
CREATE OR REPLACE VIEW kernel_chains AS
-- The windows carry no strings (strings make DuckDB's window sort several times slower): names
-- travel as ids into _kernel_names and are turned back into names once the chains are found.
WITH windows AS MATERIALIZED (FROM _interval_buckets('steps')),
kb AS (  -- the per-kernel values first: a window sorts every column its query reads
    SELECT k.rank, k.device_id, k.stream_id, k.start_ns, k.end_ns, k.end_ns - k.start_ns AS d,
           n.name_id, k.graph_node_id IS NOT NULL OR gl.correlation_id IS NOT NULL AS in_graph,
           k.category = 'memory' AND k.subcategory IN
               ('elementwise', 'norm', 'softmax', 'reduction', 'random', 'loss', 'pooling', 'quantize')
               AS fusible,
           -- role: 1 a GEMM, 2 a softmax, 3 filler, 0 other
           CASE WHEN k.subcategory = 'gemm' THEN 1
                WHEN k.subcategory = 'softmax' AND NOT regexp_matches(k.name, '(?i)log_?softmax') THEN 2
                WHEN k.category = 'memory' AND k.subcategory IN ('elementwise', 'random', 'copy') THEN 3
                ELSE 0 END::UTINYINT AS role,
           CASE WHEN k.subcategory <> 'softmax' THEN NULL
                WHEN regexp_matches(k.name, 'BFloat16|c10::Half|__half|bfloat16') THEN 2
                WHEN regexp_matches(k.name, 'double') THEN 8
                WHEN regexp_matches(k.name, 'float') THEN 4 END AS elem_bytes,
           k.correlation_id
    FROM kernels AS k
    LEFT JOIN _kernel_names AS n ON n.name IS NOT DISTINCT FROM k.name
    LEFT JOIN _graph_launched AS gl ON gl.rank = k.rank AND gl.correlation_id = k.correlation_id
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
runs AS (  -- only kernels of runs of two or more: the others (most kernels) are not chains
    SELECT *
    FROM (SELECT *, lead(cont) OVER r AS next_cont,
                 -- the run: the last kernel before (or at) this one that does not continue one
                 last_value(CASE WHEN NOT cont THEN rn END IGNORE NULLS)
                     OVER (r ROWS UNBOUNDED PRECEDING) AS run_no
          FROM linked WHERE fusible
          WINDOW r AS (PARTITION BY rank, device_id, stream_id ORDER BY rn))
    WHERE cont OR coalesce(next_cont, false)
),
fusion AS (  -- name ids: a sorted list of (rn, id) pairs; `list(... ORDER BY rn)` costs twice as much
    SELECT rank, device_id, stream_id, 'fusion' AS kind, min(start_ns) AS start_ns,
           max(end_ns) AS end_ns, count(*) AS kernels, sum(d) AS busy_ns, max(d) AS max_kernel_ns,
           0::BIGINT AS gemm_ns, count(*) FILTER (WHERE in_graph) AS graph_kernels,
           arg_min(name_id, rn) AS first_id, NULL::BIGINT AS softmax_id,
           NULL::BIGINT AS softmax_correlation_id, NULL::INTEGER AS softmax_elem_bytes,
           list_transform(list_sort(list(struct_pack(r := rn, s := name_id)))[1:12], x -> x.s) AS ids
    FROM runs WHERE fusible
    GROUP BY rank, device_id, stream_id, run_no
    HAVING count(*) >= 2
),
nf AS (  -- non-filler kernels with their neighbours in that sequence, on streams that run a
         -- softmax (most streams run none, FlashAttention's neither: their sort is not needed)
    SELECT rank, device_id, stream_id, rn, role, correlation_id, elem_bytes,
           lag(role) OVER n AS prev_role, lead(role) OVER n AS next_role,
           lag(rn) OVER n AS prev_rn, lead(rn) OVER n AS next_rn
    FROM k
    SEMI JOIN (SELECT DISTINCT rank, device_id, stream_id FROM k WHERE role = 2) AS s
        ON s.rank = k.rank AND s.device_id IS NOT DISTINCT FROM k.device_id
       AND s.stream_id IS NOT DISTINCT FROM k.stream_id
    WHERE role <> 3
    WINDOW n AS (PARTITION BY rank, device_id, stream_id ORDER BY rn)
),
attn AS (
    SELECT a.rank, a.device_id, a.stream_id, 'attention' AS kind,
           arg_min(k.start_ns, k.rn) AS start_ns, arg_max(k.end_ns, k.rn) AS end_ns,
           a.next_rn - a.prev_rn + 1 AS kernels, sum(k.d) AS busy_ns, max(k.d) AS max_kernel_ns,
           sum(k.d) FILTER (WHERE k.rn = a.prev_rn OR k.rn = a.next_rn) AS gemm_ns,
           count(*) FILTER (WHERE k.in_graph) AS graph_kernels,
           arg_min(k.name_id, k.rn) AS first_id,  -- the first GEMM
           any_value(k.name_id) FILTER (WHERE k.rn = a.rn) AS softmax_id,
           a.correlation_id AS softmax_correlation_id, a.elem_bytes AS softmax_elem_bytes,
           list_transform(list_sort(list(struct_pack(r := k.rn, s := k.name_id)))[1:12], x -> x.s) AS ids
    FROM nf a
    JOIN k ON k.rank = a.rank AND k.device_id IS NOT DISTINCT FROM a.device_id
          AND k.stream_id IS NOT DISTINCT FROM a.stream_id AND k.rn BETWEEN a.prev_rn AND a.next_rn
    WHERE a.role = 2 AND a.prev_role = 1 AND a.next_role = 1
    GROUP BY ALL
),
chains AS (  -- the window of the first kernel (_interval_buckets: a hash join, no sort of the chains)
    SELECT c.*, w.step, w.rank IS NOT NULL AS in_window
    FROM (SELECT c.*, _bucket_of(c.start_ns, g.origin_ns, g.width_ns, g.last_bucket) AS bucket
          FROM (SELECT * FROM fusion UNION ALL SELECT * FROM attn) AS c
          LEFT JOIN (SELECT DISTINCT rank, origin_ns, width_ns, last_bucket FROM windows) AS g
              ON g.rank = c.rank) AS c
    LEFT JOIN windows AS w
        ON w.rank = c.rank AND w.bucket = c.bucket AND c.start_ns >= w.start_ns AND c.start_ns < w.until_ns
),
names AS (SELECT list(display_name ORDER BY name_id) AS of_id FROM _kernel_names)  -- [i]: id i's name
SELECT c.rank, c.device_id, c.stream_id, c.step, c.in_window, c.kind, c.start_ns::BIGINT AS start_ns,
       c.end_ns::BIGINT AS end_ns, c.kernels::BIGINT AS kernels, c.busy_ns::BIGINT AS busy_ns,
       c.max_kernel_ns::BIGINT AS max_kernel_ns, c.gemm_ns::BIGINT AS gemm_ns,
       c.graph_kernels::BIGINT AS graph_kernels, names.of_id[c.first_id] AS first_name,
       names.of_id[c.softmax_id] AS softmax_name,
       c.softmax_correlation_id::BIGINT AS softmax_correlation_id,
       c.softmax_elem_bytes::INTEGER AS softmax_elem_bytes,
       list_transform(c.ids, i -> names.of_id[i]) AS names
FROM chains AS c
CROSS JOIN names;
