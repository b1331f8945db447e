-- The statements of compare() itself (nsight_analyze/compare/__init__.py).

-- name: progress_bar_off
SET enable_progress_bar = false

-- name: attach_read_only
-- One side's workspace ($path) attached read-only as catalog $catalog (cmp_b, cmp_a).
ATTACH '$path' AS "$catalog" (READ_ONLY)

-- name: use_catalog
USE "$catalog"

-- name: side_ranks
-- A side's ranks: those of its processes and those its kernels name.
SELECT rank FROM (SELECT rank FROM ranks UNION SELECT rank FROM kernels) ORDER BY rank

-- name: common_ranks
-- The ranks compared ($ranks, inlined: a bound parameter imports pandas, duck.sql_string).
CREATE OR REPLACE TEMP TABLE cmp_common AS SELECT unnest([$ranks]::INTEGER[]) AS rank

-- name: step_windows_counted
-- How many step windows of one side ($tp) lie on common ranks whose steps are not a periodic
-- kernel's ($src: the side's step sources).
SELECT count(*) FROM $tp WHERE step IS NOT NULL
AND rank IN (SELECT rank FROM cmp_common)
AND rank IN (SELECT rank FROM $src WHERE source <> 'periodic')

-- name: step_sources
-- Where one side's steps come from ($src), with how many ranks each.
SELECT source, count(*) AS ranks FROM $src GROUP BY source ORDER BY source
