-- nvtx_projection_compare: NVTX ranges projected onto the GPU, Nsight Systems' recipe beside ours.
-- Why: where a workspace holds both the nvtx_gpu_proj_trace recipe output (recipe_nvtx_gpu_proj,
-- NVIDIA's numbers, stored as read) and NVTX ranges with the GPU work they launched
-- (nvtx_gpu_projection), users should see both and where they differ, not one silently.
-- Columns:
--   rank INTEGER, name VARCHAR (range name as the recipe writes it: 'DOMAIN:text' for ranges in
--   a named domain, e.g. 'NCCL:ncclGroupEnd', else the text; NULL for the recipe's unnamed rows),
--   recipe_ranges BIGINT, recipe_gpu_ops BIGINT, recipe_projected_ns BIGINT ns (count, summed
--   NumGPUOps, summed Projected Duration of the recipe's rows; NULL: the recipe has none),
--   ours_ranges BIGINT, ours_gpu_ops BIGINT, ours_projected_ns BIGINT ns (the same from
--   nvtx_gpu_projection; NULL: our projection has none, e.g. a rank read from recipe output only),
--   ranges_diff BIGINT (ours_ranges - recipe_ranges), projected_ns_diff BIGINT ns
--   (ours_projected_ns - recipe_projected_ns); NULL where either side is missing
-- Definition: full outer join of the two per (rank, name) aggregates; one row per pair found
--   on either side. Nothing is recomputed from the recipe's rows.
-- columns: rank, name, recipe_ranges, recipe_gpu_ops, recipe_projected_ns, ours_ranges, ours_gpu_ops, ours_projected_ns, ranges_diff, projected_ns_diff
-- stage: job
-- result: stored
-- requires: nvtx_gpu_projection, recipe_nvtx_gpu_proj
CREATE OR REPLACE VIEW nvtx_projection_compare AS
WITH recipe AS (
    SELECT rank, name, count(*) AS n, CAST(sum(num_gpu_ops) AS BIGINT) AS ops,
           CAST(sum(projected_duration_ns) AS BIGINT) AS ns
    FROM recipe_nvtx_gpu_proj
    GROUP BY rank, name
),
ours AS (
    SELECT rank, CASE WHEN domain IS NOT NULL THEN domain || ':' || text ELSE text END AS name,
           count(*) AS n, CAST(sum(num_gpu_ops) AS BIGINT) AS ops,
           CAST(sum(projected_duration_ns) AS BIGINT) AS ns
    FROM nvtx_gpu_projection
    GROUP BY ALL
)
SELECT
    coalesce(r.rank, o.rank) AS rank,
    CASE WHEN r.rank IS NOT NULL THEN r.name ELSE o.name END AS name,
    r.n AS recipe_ranges, r.ops AS recipe_gpu_ops, r.ns AS recipe_projected_ns,
    o.n AS ours_ranges, o.ops AS ours_gpu_ops, o.ns AS ours_projected_ns,
    o.n - r.n AS ranges_diff,
    o.ns - r.ns AS projected_ns_diff
FROM recipe AS r
FULL OUTER JOIN ours AS o ON o.rank = r.rank AND o.name IS NOT DISTINCT FROM r.name
ORDER BY 1, 2 NULLS FIRST;
