-- diag_rank_kernels: per rank, its kernels and kernel time, and how much of it CUDA graphs replayed.
-- Why: the cuda-graphs capture note and the launch-bound finding weigh graph use over the whole
--   capture, and ingest's closing table shows each rank's kernels and their span; these per-rank
--   totals spare them a pass over every kernel of the job.
-- Columns: rank INTEGER, kernels BIGINT, graph_kernels BIGINT (replayed from a CUDA/HIP graph:
--   graph_node_id set, or launched by a graph launch call, _graph_launched), graphs BIGINT
--   (distinct graph_id; NULL when kernels were replayed but the source records no graph id, as
--   Kineto traces), kernel_ns BIGINT ns, graph_kernel_ns BIGINT ns
--   (summed durations; NULL when no kernel was replayed from a graph), first_start_ns BIGINT ns,
--   last_end_ns BIGINT ns (the first kernel's start, the last one's end: the rank's file time).
-- Definition: `kernels` grouped by rank, whole capture.
-- columns: rank, kernels, graph_kernels, graphs, kernel_ns, graph_kernel_ns, first_start_ns, last_end_ns
-- stage: rank
-- result: stored
-- requires: kernels, _graph_launched
CREATE OR REPLACE VIEW diag_rank_kernels AS
SELECT rank, count(*) AS kernels, count(*) FILTER (WHERE graph_replay) AS graph_kernels,
       CASE WHEN count(*) FILTER (WHERE graph_replay AND graph_id IS NULL) > 0 THEN NULL
            ELSE count(DISTINCT graph_id) END AS graphs,
       CAST(sum(end_ns - start_ns) AS BIGINT) AS kernel_ns,
       CAST(sum(end_ns - start_ns) FILTER (WHERE graph_replay) AS BIGINT) AS graph_kernel_ns,
       min(start_ns) AS first_start_ns, max(end_ns) AS last_end_ns
FROM (SELECT k.rank, k.start_ns, k.end_ns, k.graph_id,
             k.graph_node_id IS NOT NULL OR gl.correlation_id IS NOT NULL AS graph_replay
      FROM kernels AS k
      LEFT JOIN _graph_launched AS gl ON gl.rank = k.rank AND gl.correlation_id = k.correlation_id)
GROUP BY rank;
