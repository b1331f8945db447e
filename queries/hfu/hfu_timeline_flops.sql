-- hfu_timeline_flops: every timeline kernel (`kernels`) with the FLOPs counters measured for it (kernel_flops).
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
--   'name':       same name key where ncu recorded no launch dimensions: mean FLOPs of those launches;
--   'cupti_range': the CUPTI range-profiler kernel of the same rank placed on this kernel by
--                 cupti_range_joins (same name, same order); only where no ncu match applies.
--   Otherwise flops is NULL (the kernel had no counter data).
-- Columns: rank, start_ns, end_ns, duration_ns (ns), name, category, correlation_id,
--   invocation (the kernel's 0-based invocation of its signature on its rank; NULL where ncu
--   profiled no launch with that signature, so nothing is numbered that cannot match),
--   flops, tensor_flops, fp32_flops, fp64_flops, fp16_flops (FLOP), dram_bytes (byte), match,
--   ncu_launches (how many profiled launches the value came from: ncu launches; 1 for 'cupti_range').
-- columns: rank, start_ns, end_ns, duration_ns, name, category, correlation_id, invocation, flops, tensor_flops, fp32_flops, fp64_flops, fp16_flops, dram_bytes, match, ncu_launches
-- stage: live
-- requires: hfu_canon_name, kernel_flops, cupti_range_joins, kernels, ncu_kernels
CREATE OR REPLACE VIEW hfu_timeline_flops AS
WITH per_kernel AS (  -- kernel_flops back to one row per profiled kernel
    SELECT source, rank, file_id, kernel_id,
        sum(flops) AS flops,
        sum(flops) FILTER (WHERE pipe = 'tensor') AS tensor_flops,
        sum(flops) FILTER (WHERE pipe = 'cuda_core' AND precision = 'fp32') AS fp32_flops,
        sum(flops) FILTER (WHERE pipe = 'cuda_core' AND precision = 'fp64') AS fp64_flops,
        sum(flops) FILTER (WHERE pipe = 'cuda_core' AND precision = 'fp16') AS fp16_flops,
        any_value(dram_bytes) AS dram_bytes
    FROM kernel_flops GROUP BY ALL
),
ncu AS (
    SELECT f.file_id, f.kernel_id AS launch_id, f.flops, f.tensor_flops, f.fp32_flops, f.fp64_flops,
        f.fp16_flops, f.dram_bytes, k.match_key, k.grid_size, k.block_size,
        row_number() OVER (PARTITION BY k.match_key, k.grid_size, k.block_size ORDER BY f.file_id, f.kernel_id) - 1
            AS invocation
    FROM per_kernel f JOIN ncu_kernels k ON k.file_id = f.file_id AND k.launch_id = f.kernel_id
    WHERE f.source = 'ncu' AND f.flops IS NOT NULL
),
cr AS (  -- range-profiler kernels joined to a timeline kernel
    SELECT j.rank, j.start_ns, j.name, j.correlation_id, f.flops, f.tensor_flops, f.fp32_flops, f.fp64_flops,
        f.fp16_flops, f.dram_bytes
    FROM cupti_range_joins j
    JOIN per_kernel f ON f.source = 'cupti_range' AND f.rank = j.rank AND f.kernel_id = j.range_id
    WHERE j.status = 'joined' AND f.flops IS NOT NULL
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
tl AS NOT MATERIALIZED (
    SELECT k.rank, k.start_ns, k.end_ns, k.duration_ns, k.name, k.category, k.correlation_id,
        nm.match_key,
        k.grid_x::BIGINT * k.grid_y * k.grid_z AS grid_size,
        k.block_x::BIGINT * k.block_y * k.block_z AS block_size
    FROM kernels k LEFT JOIN names nm ON nm.name = k.name
),
sig AS NOT MATERIALIZED (  -- the signature's launch count in ncu (NULL: ncu profiled no launch of it)
    SELECT t.*, s.n AS n_sig
    FROM tl t
    LEFT JOIN by_sig s ON s.match_key = t.match_key AND s.grid_size = t.grid_size AND s.block_size = t.block_size
),
matched AS (  -- invocation numbers only where a profiled launch can match: the window sorts what it numbers
    SELECT *, row_number() OVER (PARTITION BY rank, match_key, grid_size, block_size
                                 ORDER BY start_ns, correlation_id) - 1 AS invocation
    FROM sig WHERE n_sig IS NOT NULL
    UNION ALL
    SELECT *, NULL::BIGINT AS invocation FROM sig WHERE n_sig IS NULL
)
SELECT t.rank, t.start_ns, t.end_ns, t.duration_ns, t.name, t.category, t.correlation_id, t.invocation,
    coalesce(i.flops, n.flops, c.flops) AS flops,
    CASE WHEN coalesce(i.flops, n.flops) IS NOT NULL THEN coalesce(i.tensor_flops, n.tensor_flops)
         ELSE c.tensor_flops END AS tensor_flops,
    CASE WHEN coalesce(i.flops, n.flops) IS NOT NULL THEN coalesce(i.fp32_flops, n.fp32_flops)
         ELSE c.fp32_flops END AS fp32_flops,
    CASE WHEN coalesce(i.flops, n.flops) IS NOT NULL THEN coalesce(i.fp64_flops, n.fp64_flops)
         ELSE c.fp64_flops END AS fp64_flops,
    CASE WHEN coalesce(i.flops, n.flops) IS NOT NULL THEN coalesce(i.fp16_flops, n.fp16_flops)
         ELSE c.fp16_flops END AS fp16_flops,
    CASE WHEN coalesce(i.flops, n.flops) IS NOT NULL THEN coalesce(i.dram_bytes, n.dram_bytes)
         ELSE c.dram_bytes END AS dram_bytes,
    CASE WHEN i.flops IS NOT NULL AND t.invocation < t.n_sig THEN 'invocation'
         WHEN i.flops IS NOT NULL THEN 'repeat'
         WHEN n.flops IS NOT NULL THEN 'name'
         WHEN c.flops IS NOT NULL THEN 'cupti_range' END AS match,
    CASE WHEN i.flops IS NOT NULL THEN 1 WHEN n.flops IS NOT NULL THEN n.n WHEN c.flops IS NOT NULL THEN 1
         ELSE 0 END AS ncu_launches
FROM matched t
LEFT JOIN ncu i ON i.match_key = t.match_key AND i.grid_size = t.grid_size AND i.block_size = t.block_size
               AND i.invocation = t.invocation % t.n_sig
LEFT JOIN by_name n ON n.match_key = t.match_key
LEFT JOIN cr c ON c.rank = t.rank AND c.start_ns = t.start_ns AND c.name = t.name
              AND c.correlation_id IS NOT DISTINCT FROM t.correlation_id;
