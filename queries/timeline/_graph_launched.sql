-- _graph_launched: the launch calls that replayed a CUDA/HIP graph, by (rank, correlation_id).
-- Why: nsys marks a replayed kernel with its graph node id, but a Kineto trace (CUDA or ROCm)
--   carries none: there a kernel is a graph replay when its correlation id is the one of a graph
--   launch call (cudaGraphLaunch, cuGraphLaunch, hipGraphLaunch, is_graph_launch). Kernels and
--   their launch call share (rank, correlation_id) in every source, so one semi-join with this
--   small table (one row per graph launch) tells a replayed kernel from a launched one.
-- Columns: rank INTEGER, correlation_id BIGINT (a graph launch call's; unique per rank).
-- Definition: DISTINCT (rank, correlation_id) of cuda_api rows with is_graph_launch(name) and a
--   correlation id.
-- columns: rank, correlation_id
-- stage: rank
-- result: step
-- requires: cuda_api, is_graph_launch
CREATE OR REPLACE VIEW _graph_launched AS
SELECT DISTINCT rank, correlation_id
FROM cuda_api
WHERE correlation_id IS NOT NULL AND is_graph_launch(name);
