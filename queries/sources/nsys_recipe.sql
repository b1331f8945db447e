-- The statements of the Nsight Systems recipe-output reader (nsight_analyze/sources/nsys_recipe.py).

-- name: insert_nvtx_projection
-- An nvtx_gpu_proj_trace table (_recipe_in) under the ranks of its (Rank, PID) pairs (_recipe_ranks).
INSERT INTO recipe_nvtx_gpu_proj
SELECT m.rank, ?, ?, CAST(t."Rank" AS INTEGER), t."Name",
       CAST(t."Projected Start" AS BIGINT), CAST(t."Projected Duration" AS BIGINT),
       CAST(t."Projected Start" AS BIGINT) + CAST(t."Projected Duration" AS BIGINT),
       CAST(round(t."Orig Start") AS BIGINT), CAST(round(t."Orig Duration") AS BIGINT),
       CAST(round(t."Orig Start") AS BIGINT) + CAST(round(t."Orig Duration") AS BIGINT),
       t."Style", CAST(t."PID" AS BIGINT), CAST(t."TID" AS BIGINT), CAST(t."NumGPUOps" AS BIGINT),
       CAST(t."Lvl" AS INTEGER), CAST(t."NumChild" AS BIGINT), CAST(t."RangeId" AS BIGINT),
       CAST(t."ParentId" AS BIGINT), t."RangeStack"
FROM _recipe_in AS t
JOIN _recipe_ranks AS m ON m.recipe_rank = t."Rank" AND m.pid = t."PID"

-- name: insert_output
INSERT INTO recipe_outputs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: insert_gpu
INSERT INTO gpus VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'TARGET_INFO_GPU')

-- name: insert_env
INSERT INTO env VALUES (?, ?, ?)

-- name: report_processes
-- The processes of the workspace's reports of format $format: their file's path, pid and rank.
SELECT f.path, r.pid, r.rank, f.file_id FROM files AS f JOIN ranks AS r USING (file_id)
WHERE f.source_format = $format
