-- hfu_timeline_flops: every timeline kernel (nsys `kernels`) with the FLOPs Nsight Compute measured for it.
-- Purpose: ncu profiles a few launches under replay; nsys times every launch unperturbed. FLOPs are
--   shape-determined, so a kernel's measured FLOPs apply to its occurrences on the timeline.
-- Matching (all ncu files together; ncu data is not per rank), first that applies:
--   'invocation': same hfu_canon_name(name), grid size and block size (products), and the same
--                 0-based invocation number of that signature (rank timeline order vs ncu launch
--                 order, ncu launches ordered by file and ID);
--   'repeat':     same signature, timeline invocation i >= n profiled launches: launch i mod n.
--                 ncu usually profiles one or a few steps and training repeats them, so a sample
--                 of whole steps gives exact FLOPs per kernel when it starts at a step boundary,
--                 and exact totals over whole steps in any case;
--   'name':       same name key where ncu recorded no launch dimensions: mean FLOPs of those launches.
--   Otherwise flops is NULL (the kernel had no counter data).
-- Columns: rank, start_ns, end_ns, duration_ns (ns), name, category, correlation_id, invocation,
--   flops, tensor_flops, fp32_flops, fp64_flops, fp16_flops (FLOP), dram_bytes (byte), match,
--   ncu_launches (how many ncu launches the value came from).
-- columns: rank, start_ns, end_ns, duration_ns, name, category, correlation_id, invocation, flops, tensor_flops, fp32_flops, fp64_flops, fp16_flops, dram_bytes, match, ncu_launches
-- stage: live
-- requires: hfu_canon_name, hfu_ncu_flops, kernels, ncu_kernels
CREATE OR REPLACE VIEW hfu_timeline_flops AS
WITH ncu AS (
    SELECT f.*, k.match_key, k.grid_size, k.block_size,
        row_number() OVER (PARTITION BY k.match_key, k.grid_size, k.block_size ORDER BY f.file_id, f.launch_id) - 1
            AS invocation
    FROM hfu_ncu_flops f JOIN ncu_kernels k USING (file_id, launch_id)
    WHERE f.flops IS NOT NULL
),
by_sig AS (
    SELECT match_key, grid_size, block_size, count(*) AS n
    FROM ncu WHERE grid_size IS NOT NULL AND block_size IS NOT NULL GROUP BY ALL
),
by_name AS (
    SELECT match_key, avg(flops) AS flops, avg(tensor_flops) AS tensor_flops,
        avg(fp32_flops) AS fp32_flops, avg(fp64_flops) AS fp64_flops, avg(fp16_flops) AS fp16_flops,
        avg(dram_bytes) AS dram_bytes, count(*) AS n
    FROM ncu WHERE grid_size IS NULL OR block_size IS NULL GROUP BY ALL
),
names AS (  -- canonicalise each distinct name once, and only names ncu profiled can match
    SELECT name, hfu_canon_name(name) AS match_key FROM (SELECT DISTINCT name FROM kernels)
    WHERE EXISTS (SELECT 1 FROM ncu)
),
tl AS (
    SELECT k.rank, k.start_ns, k.end_ns, k.duration_ns, k.name, k.category, k.correlation_id,
        nm.match_key,
        k.grid_x::BIGINT * k.grid_y * k.grid_z AS grid_size,
        k.block_x::BIGINT * k.block_y * k.block_z AS block_size
    FROM kernels k LEFT JOIN names nm ON nm.name = k.name
),
tln AS (
    SELECT *, row_number() OVER (PARTITION BY rank, match_key, grid_size, block_size
                                 ORDER BY start_ns, correlation_id) - 1 AS invocation
    FROM tl
),
matched AS (
    SELECT t.*, s.n AS n_sig
    FROM tln t
    LEFT JOIN by_sig s ON s.match_key = t.match_key AND s.grid_size = t.grid_size AND s.block_size = t.block_size
)
SELECT t.rank, t.start_ns, t.end_ns, t.duration_ns, t.name, t.category, t.correlation_id, t.invocation,
    coalesce(i.flops, n.flops) AS flops,
    coalesce(i.tensor_flops, n.tensor_flops) AS tensor_flops,
    coalesce(i.fp32_flops, n.fp32_flops) AS fp32_flops,
    coalesce(i.fp64_flops, n.fp64_flops) AS fp64_flops,
    coalesce(i.fp16_flops, n.fp16_flops) AS fp16_flops,
    coalesce(i.dram_bytes, n.dram_bytes) AS dram_bytes,
    CASE WHEN i.flops IS NOT NULL AND t.invocation < t.n_sig THEN 'invocation'
         WHEN i.flops IS NOT NULL THEN 'repeat'
         WHEN n.flops IS NOT NULL THEN 'name' END AS match,
    CASE WHEN i.flops IS NOT NULL THEN 1 WHEN n.flops IS NOT NULL THEN n.n ELSE 0 END AS ncu_launches
FROM matched t
LEFT JOIN ncu i ON i.match_key = t.match_key AND i.grid_size = t.grid_size AND i.block_size = t.block_size
               AND i.invocation = t.invocation % t.n_sig
LEFT JOIN by_name n ON n.match_key = t.match_key;
