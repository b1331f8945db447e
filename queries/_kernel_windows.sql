-- _kernel_windows: every kernel that starts inside a step window, with that window.
-- Why: rank_step_work, graph_candidates, graph_coverage and hfu_window_kernels place kernels in
--   windows; one ASOF join of the batch's kernels instead of one each (each sorts every kernel:
--   0.4-1.1 s per 8 ranks x 200k kernels, the most with names, which travel here as ids).
-- Columns: rank INTEGER, step BIGINT (NULL: the whole-capture window), window_start_ns BIGINT ns,
--   device_id INTEGER, stream_id BIGINT, start_ns, end_ns, duration_ns BIGINT ns (kernels'),
--   correlation_id BIGINT, graph_id BIGINT, graph_node_id BIGINT, category VARCHAR,
--   name_id BIGINT (_kernel_names), grid_x, grid_y, grid_z, block_x, block_y, block_z INTEGER.
-- Definition: a kernel's window is the last row of `steps` of its rank starting at or before the
--   kernel's start (a rank's windows do not overlap); the kernel is kept when it starts before
--   that window's end.
-- stage: rank
-- result: step
-- requires: kernels, steps, _kernel_names
CREATE OR REPLACE VIEW _kernel_windows AS
SELECT k.rank, w.step, w.start_ns AS window_start_ns, k.device_id, k.stream_id, k.start_ns, k.end_ns,
       k.duration_ns, k.correlation_id, k.graph_id, k.graph_node_id, k.category,
       k.name_id, k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z
FROM (SELECT k.*, n.name_id
      FROM kernels AS k
      LEFT JOIN _kernel_names AS n ON n.name IS NOT DISTINCT FROM k.name) AS k
ASOF JOIN steps AS w ON w.rank = k.rank AND w.start_ns <= k.start_ns
WHERE k.start_ns < w.end_ns;
