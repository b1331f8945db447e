-- The statements of the `ingest` command (nsight_analyze/commands/ingest.py).

-- name: landed_ranks
-- What landed, one row per rank: host, device, GPU, kernels, the span of its kernels (ms), how
-- its rank number was found and its file's warnings.
SELECT r.rank, r.hostname AS host, r.device_id AS dev,
       coalesce(regexp_replace(r.gpu_name, '^NVIDIA ', ''), '?') AS gpu,
       coalesce(k.kernels, 0) AS kernels,
       round((k.last_end_ns - k.first_start_ns) / 1e6, 3) AS span_ms,
       r.rank_source, len(f.warnings) AS warnings
FROM ranks r JOIN files f USING (file_id) LEFT JOIN diag_rank_kernels k USING (rank)

-- name: ranks_in_order
-- landed_ranks ($ranks) by rank.
$ranks ORDER BY r.rank

-- name: landed_hosts
-- The same per host, for a larger job ($ranks: landed_ranks): rank ranges,
-- GPUs, kernels per rank (a range when they differ), the longest span.
SELECT host,
       CASE WHEN max(rank) - min(rank) + 1 = count(*) THEN min(rank) || '-' || max(rank)
            ELSE string_agg(rank::VARCHAR, ',' ORDER BY rank) END AS ranks,
       string_agg(DISTINCT gpu, ', ') AS gpu,
       CASE WHEN min(kernels) = max(kernels) THEN min(kernels)::VARCHAR
            ELSE min(kernels) || '-' || max(kernels) END AS kernels_per_rank,
       max(span_ms) AS span_ms, string_agg(DISTINCT rank_source, ', ') AS rank_source,
       sum(warnings) AS warnings
FROM ($ranks) GROUP BY host ORDER BY min(rank)
