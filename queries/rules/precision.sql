-- The statements of rules/precision.py (which tensor-core precisions the job's GPUs take).

-- name: kernel_families_seen
-- Whether any kernel name of the job is of each GPU-specific kernel-name family ($families:
-- gpus.families_sql(), one fam_NAME column per family).
SELECT $families FROM (SELECT DISTINCT name FROM kernel_summary)

-- name: rank_compute_capability
-- Each rank's compute capability, as the trace records it for its device.
SELECT r.rank, any_value(g.compute_major) AS major, any_value(g.compute_minor) AS minor
FROM ranks r JOIN gpus g ON g.rank = r.rank AND g.device_id IS NOT DISTINCT FROM r.device_id
WHERE g.compute_major IS NOT NULL GROUP BY r.rank
