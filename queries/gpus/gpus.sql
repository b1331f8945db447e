-- The statements of the GPU peak resolution (nsight_analyze/gpus/__init__.py).

-- name: ncu_peaks
-- Per hardware-counter file, the peaks of one precision ($precision: a quoted literal, not a
-- bound parameter: binding one imports pandas, duck.sql_string) its roofline ridge points use.
SELECT p.file_id, f.path, p.source, p.peak_flops / 1e12 AS peak_tflops,
       p.mem_bw_bps / 1e9 AS mem_bw_gbs, p.reason
FROM ncu_peaks p LEFT JOIN files f USING (file_id)
WHERE p.precision = $precision ORDER BY p.file_id

-- name: vendor
-- The vendor a rank's file says it ran on (`f`: its `files` row): a PyTorch-profiler trace names its
-- tracer (sources/kineto/meta.py: 'cupti ...' or 'roctracer ...' / 'hip ...'), an Nsight Systems file
-- is NVIDIA's; NULL when the file does not say.
CASE WHEN f.nsys_version LIKE 'roctracer %' OR f.nsys_version LIKE 'hip %' THEN 'amd'
                     WHEN f.nsys_version LIKE 'cupti %' OR f.source_format IN ('nsys-sqlite', 'nsys-recipe')
                     THEN 'nvidia' END

-- name: rank_gpus
-- One row per rank: the GPU it ran on (the `gpus` row of its device, else the first), what the
-- device reports (SM count, clock, compute capability, memory) and its vendor ($vendor: `vendor`).
WITH g AS (
    SELECT g.*, row_number() OVER (
               PARTITION BY g.rank
               ORDER BY (g.device_id IS NOT DISTINCT FROM r.device_id) DESC, g.device_id) AS pick
    FROM gpus g JOIN ranks r ON r.rank = g.rank
)
SELECT r.rank, r.file_id, coalesce(g.name, r.gpu_name) AS name, g.sm_count, g.clock_hz,
       g.compute_major, g.compute_minor, g.memory_bandwidth_bps, g.memory_bytes,
       $vendor AS vendor
FROM ranks r LEFT JOIN g ON g.rank = r.rank AND g.pick = 1 LEFT JOIN files f ON f.file_id = r.file_id
ORDER BY r.rank

-- name: env_hints
-- The environment variables of each file that may state a peak ($pattern: ENV_HINT_PATTERN).
SELECT file_id, name, value FROM env WHERE regexp_matches(name, '$pattern')

-- name: kernel_families
-- Per rank, whether its kernel names ($names: kernel_summary or kernels) hold each architecture's
-- family ($families: arch.families_sql, one boolean column per KERNEL_FAMILIES entry).
SELECT rank, $families FROM (SELECT DISTINCT rank, name FROM $names) GROUP BY rank
