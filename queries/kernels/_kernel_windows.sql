-- _kernel_windows: every kernel that starts inside a step window, with that window.
-- Why: rank_step_work, graph_candidates, graph_coverage and hfu_window_kernels place kernels in
--   windows; one ASOF join of the batch's kernels instead of one each (each sorts every kernel:
--   0.4-1.1 s per 8 ranks x 200k kernels, the most with names, which travel here as ids).
-- Columns: rank INTEGER, step BIGINT (NULL: the whole-capture window), window_start_ns BIGINT ns,
--   stream_id BIGINT, start_ns, end_ns BIGINT ns (kernels'), correlation_id BIGINT, graph_id BIGINT,
--   graph_node_id BIGINT, graph_replay BOOLEAN (replayed from a CUDA/HIP graph: graph_node_id set,
--   or launched by a graph launch call, _graph_launched), comms BOOLEAN (category 'comms'),
--   name_id BIGINT (_kernel_names), grid_x, grid_y, grid_z, block_x, block_y, block_z INTEGER.
--   Only what its readers use: this table of every kernel is written once per batch, and its
--   width is its cost (without device_id and duration_ns, and with a flag for the category:
--   0.38-0.50 s -> 0.33-0.43 s of 16 ranks x 200k kernels).
-- Definition: a kernel's window is the last row of `steps` of its rank starting at or before the
--   kernel's start (a rank's windows do not overlap); the kernel is kept when it starts before
--   that window's end. Found by _interval_buckets (a hash join; an ASOF join sorted every kernel).
-- stage: rank
-- result: step
-- requires: kernels, steps, _interval_buckets, _bucket_of, _kernel_names, _graph_launched
CREATE OR REPLACE VIEW _kernel_windows AS
WITH w AS MATERIALIZED (FROM _interval_buckets('steps')),
k AS (
    SELECT k.*, n.name_id, _bucket_of(k.start_ns, g.origin_ns, g.width_ns, g.last_bucket) AS bucket,
           k.graph_node_id IS NOT NULL OR gl.correlation_id IS NOT NULL AS graph_replay
    FROM kernels AS k
    JOIN (SELECT DISTINCT rank, origin_ns, width_ns, last_bucket FROM w) AS g ON g.rank = k.rank
    LEFT JOIN _kernel_names AS n ON n.name IS NOT DISTINCT FROM k.name
    LEFT JOIN _graph_launched AS gl ON gl.rank = k.rank AND gl.correlation_id = k.correlation_id
)
SELECT k.rank, w.step, w.start_ns AS window_start_ns, k.stream_id, k.start_ns, k.end_ns,
       k.correlation_id, k.graph_id, k.graph_node_id, k.graph_replay, k.category IS NOT DISTINCT FROM 'comms' AS comms,
       k.name_id, k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z
FROM k
JOIN w ON w.rank = k.rank AND w.bucket = k.bucket AND k.start_ns >= w.start_ns AND k.start_ns < w.until_ns;
