-- The statements of the `memory-bound` finding (nsight_analyze/rules/memory_bound.py).

-- name: memory_families
-- memory-category GPU time by fix family: memory kernels by subcategory, memops by kind (not the
-- peer copies and NCCL copy-engine copies gpu_ops counts as communication); $kernel_family:
-- advice.family_sql of the kernels' category and subcategory, $memop_family: advice.MEMOP_FAMILY_SQL.
SELECT family, sum(ns) AS total_ns, sum(n) AS ops,
       round(100.0 * sum(ns) / sum(sum(ns)) OVER (), 2) AS pct_of_memory_time
FROM (SELECT $kernel_family AS family, end_ns - start_ns AS ns, 1 AS n
      FROM kernels WHERE category = 'memory'
      UNION ALL
      SELECT $memop_family AS family, end_ns - start_ns, 1 FROM memops AS m
      WHERE kind <> 'PtoP'
        AND NOT EXISTS (SELECT 1 FROM nccl_ce_copies AS c
                        WHERE c.rank = m.rank AND c.correlation_id = m.correlation_id))
GROUP BY family ORDER BY total_ns DESC, family

-- name: memory_kernel_median
SELECT median(end_ns - start_ns) FROM kernels WHERE category = 'memory'

-- name: memory_bound_launch_count
SELECT count(*) FROM roofline WHERE bound = 'memory'

-- name: roofline_sources
-- roofline sources with a point (Nsight Compute, the PyTorch profiler's CUPTI range profiler)
SELECT DISTINCT source FROM roofline WHERE bound IS NOT NULL ORDER BY source

-- name: memory_bound_launches
-- Launches below the ridge point: achieved DRAM bandwidth against the GPU's (roofline).
SELECT name, count(*) AS launches, CAST(sum(duration_ns) AS BIGINT) AS ncu_duration_ns,
       CAST(sum(dram_bytes) AS BIGINT) AS dram_bytes,
       round(100.0 * sum(dram_bytes) / sum(duration_ns * 1e-9 * mem_bw_bps), 1) AS
           pct_of_dram_bw,
       round(avg(intensity), 3) AS intensity, round(avg(ridge_flop_per_byte), 1) AS ridge
FROM roofline WHERE bound = 'memory' GROUP BY name ORDER BY ncu_duration_ns DESC, name

-- name: memory_bound_share
-- by profiled time; by launch count when the export has no durations
SELECT coalesce(100.0 * sum(duration_ns) FILTER (WHERE bound = 'memory')
                / nullif(sum(duration_ns), 0),
                100.0 * count(*) FILTER (WHERE bound = 'memory') / nullif(count(*), 0)) FROM roofline

-- name: bandwidth_headroom
-- The memory-bound launches' bandwidth headroom: 1 - bytes / (peak BW x duration), time-weighted.
SELECT sum(greatest(duration_ns - dram_bytes / mem_bw_bps * 1e9, 0)) /
       nullif(sum(duration_ns), 0)
FROM roofline WHERE bound = 'memory' AND mem_bw_bps > 0

-- name: worst_rank_memory_ns
SELECT max(m) FROM (SELECT rank, sum(memory_ns) AS m FROM diag_windows GROUP BY rank)

-- name: memory_steps
SELECT DISTINCT step FROM diag_windows WHERE step IS NOT NULL AND memory_ns > 0
ORDER BY step

-- name: memory_share_of_busy
SELECT 100.0 * sum(memory_ns) / nullif(sum(window_ns - idle_ns), 0) FROM diag_windows

-- name: memory_category_kernels
-- Kernels the name rules classify as memory-bound, by total time over ranks (kernel_summary).
SELECT name, subcategory, sum(instances) AS instances, sum(total_ns) AS total_ns,
       round(avg(avg_ns), 1) AS avg_ns FROM kernel_summary WHERE category = 'memory'
GROUP BY name, subcategory ORDER BY total_ns DESC, name, subcategory
