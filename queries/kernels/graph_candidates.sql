-- graph_candidates: launch-bound regions outside CUDA graphs, the places where capturing a graph
--   would remove the per-kernel launch cost.
-- Why: when the host launches kernels more slowly than the GPU runs them, the GPU idles before
--   each kernel; a CUDA graph launches the whole region with one call (docs/diagnose.md
--   `cuda-graph-candidates`).
-- Columns: rank INTEGER, step BIGINT (NULL: the whole-capture window), start_ns, end_ns BIGINT ns
--   (first kernel start, last kernel end), kernels BIGINT, streams BIGINT, busy_ns BIGINT ns
--   (summed kernel durations), idle_ns BIGINT ns (launch_gap + host_bound idle before the region's
--   kernels), launch_gap_ns, host_bound_ns BIGINT ns (its two parts), short_kernels BIGINT
--   (kernels shorter than 10 us), first_name VARCHAR (short name of the first kernel).
-- Definition: a kernel is launch-bound when the GPU idle piece that its start ended (`gaps`, same
--   rank and correlation_id, cause launch_gap or host_bound) is non-empty and it is not replayed
--   from a graph (_kernel_windows.graph_replay: a graph node, or launched by a graph launch
--   call). The rank's kernels, ordered by start over all streams, form islands of consecutive
--   launch-bound kernels within one step window; an island of >= 2 kernels is a region. The gaps
--   rows of the step windows are used (the whole-capture rows only for ranks without steps).
-- columns: rank, step, start_ns, end_ns, kernels, streams, busy_ns, idle_ns, launch_gap_ns, host_bound_ns, short_kernels, first_name
-- stage: rank
-- result: stored
-- requires: _kernel_windows, kernels, gaps, steps
CREATE OR REPLACE VIEW graph_candidates AS
WITH idle AS (
    SELECT rank, correlation_id,
           sum(duration_ns) FILTER (WHERE cause = 'launch_gap') AS launch_gap_ns,
           sum(duration_ns) FILTER (WHERE cause = 'host_bound') AS host_bound_ns
    FROM gaps
    WHERE cause IN ('launch_gap', 'host_bound') AND duration_ns > 0
      AND (step IS NOT NULL OR rank NOT IN (SELECT rank FROM steps WHERE step IS NOT NULL))
    GROUP BY rank, correlation_id
),
k AS (  -- rn: the kernel's place in (rank, start, end, stream, correlation id) order (a total
        -- order: not the export's row order, which nsys >= 2025.6 does not keep), from one sort and a
        -- streaming pass over it (an empty OVER keeps the ORDER BY's order; a window partitioned
        -- by rank sorted as much and took twice the CPU); only launch-bound kernels go on
    SELECT * FROM (
        SELECT *, row_number() OVER () AS rn
        FROM (SELECT k.rank, k.step, k.stream_id, k.start_ns, k.end_ns, k.end_ns - k.start_ns AS d,
                     coalesce(i.launch_gap_ns, 0) AS launch_gap_ns, coalesce(i.host_bound_ns, 0) AS host_bound_ns,
                     NOT k.graph_replay AND i.correlation_id IS NOT NULL AS lb
              FROM _kernel_windows AS k
              LEFT JOIN idle i ON i.rank = k.rank AND i.correlation_id = k.correlation_id
              ORDER BY k.rank, k.start_ns, k.end_ns, k.stream_id, k.correlation_id))
    WHERE lb
),
islands AS (  -- runs of consecutive launch-bound kernels
    SELECT *, rn - row_number() OVER (PARTITION BY rank, step ORDER BY rn) AS island
    FROM k
),
runs AS (
    SELECT rank, step, island, min(start_ns)::BIGINT AS start_ns, max(end_ns)::BIGINT AS end_ns,
           count(*) AS kernels, count(DISTINCT stream_id) AS streams, sum(d)::BIGINT AS busy_ns,
           sum(launch_gap_ns + host_bound_ns)::BIGINT AS idle_ns, sum(launch_gap_ns)::BIGINT AS launch_gap_ns,
           sum(host_bound_ns)::BIGINT AS host_bound_ns, count(*) FILTER (WHERE d < 10000) AS short_kernels,
           arg_min({'stream_id': stream_id, 'start_ns': start_ns, 'end_ns': end_ns}, rn) AS first
    FROM islands
    GROUP BY rank, step, island
    HAVING count(*) >= 2
)
SELECT r.rank, r.step, any_value(r.start_ns) AS start_ns, any_value(r.end_ns) AS end_ns,
       any_value(r.kernels) AS kernels, any_value(r.streams) AS streams, any_value(r.busy_ns) AS busy_ns,
       any_value(r.idle_ns) AS idle_ns, any_value(r.launch_gap_ns) AS launch_gap_ns,
       any_value(r.host_bound_ns) AS host_bound_ns, any_value(r.short_kernels) AS short_kernels,
       min(coalesce(n.short_name, n.name)) AS first_name  -- min: one name if two kernels share the times
FROM runs AS r
LEFT JOIN kernels AS n ON n.rank = r.rank AND n.stream_id IS NOT DISTINCT FROM r.first.stream_id
    AND n.start_ns = r.first.start_ns AND n.end_ns = r.first.end_ns
GROUP BY r.rank, r.step, r.island;
