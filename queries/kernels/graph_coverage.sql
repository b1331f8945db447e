-- graph_coverage: per rank and step window, how many kernels and how much kernel time come from
--   CUDA/HIP-graph replays.
-- Why: a graph replays many kernels for one host call, so its kernels cost no per-kernel launch;
--   the share of kernels and time already in graphs says how much launch overhead is left to
--   capture (docs/diagnose.md `cuda-graph-candidates`).
-- Columns: rank INTEGER, step BIGINT (NULL: the whole-capture window), kernels BIGINT,
--   graph_kernels BIGINT (replayed from a graph: graph_node_id set, or launched by a graph launch
--   call such as hipGraphLaunch, _kernel_windows.graph_replay), kernel_ns BIGINT ns,
--   graph_kernel_ns BIGINT ns (summed durations), graphs BIGINT (distinct graph_id of the
--   replayed kernels; NULL when kernels were replayed but the source records no graph id, as
--   Kineto traces: the number of graphs is unknown there, not 0).
-- Definition: kernels whose start lies in a `steps` window [start_ns, end_ns) of their rank;
--   kernels outside every window are not counted.
-- columns: rank, step, kernels, graph_kernels, kernel_ns, graph_kernel_ns, graphs
-- stage: rank
-- result: stored
-- requires: _kernel_windows
CREATE OR REPLACE VIEW graph_coverage AS
SELECT rank, step, count(*) AS kernels, count(*) FILTER (WHERE graph_replay) AS graph_kernels,
       CAST(sum(end_ns - start_ns) AS BIGINT) AS kernel_ns,
       CAST(coalesce(sum(end_ns - start_ns) FILTER (WHERE graph_replay), 0) AS BIGINT) AS graph_kernel_ns,
       CASE WHEN count(*) FILTER (WHERE graph_replay AND graph_id IS NULL) > 0 THEN NULL
            ELSE count(DISTINCT graph_id) FILTER (WHERE graph_replay) END AS graphs
FROM _kernel_windows
GROUP BY rank, step;
