-- The statements of the MFU/HFU summary document (nsight_analyze/mfu/__init__.py); each reads the
-- rows' TEMP table _mfu_rows (mfu/rows.py's create_rows_table) or the workspace.

-- name: range_join_failures
-- The CUPTI range-profiler kernels not placed on the timeline, per reason, with their ranks.
SELECT status, count(*), count(DISTINCT rank) FROM cupti_range_joins WHERE status <> 'joined'
GROUP BY status ORDER BY count(*) DESC

-- name: weighted_total
-- Σ $column / Σ (window x peak) over rows where both are known (GPU-time weighted).
sum($column) FILTER (WHERE $column IS NOT NULL AND peak_flops IS NOT NULL AND window_ns > 0)
    / sum(window_ns * 1e-9 * peak_flops)
        FILTER (WHERE $column IS NOT NULL AND peak_flops IS NOT NULL AND window_ns > 0)

-- name: stepped
-- The rows of step windows (the summary's rows when any window is a step's; else every row).
step IS NOT NULL

-- name: rows_overview
-- How many rows, whether any is a step's, and the job's GPU count.
SELECT count(*), coalesce(bool_or(step IS NOT NULL), false), any_value(n_gpus) FROM _mfu_rows

-- name: stepped_rows
-- The rows the totals are over ($stepped: `stepped` or true), for the DCGM cross-check.
SELECT * FROM _mfu_rows WHERE $stepped

-- name: totals
-- MFU ($mfu), HFU ($hfu: weighted_total of model_flops and counted_flops), the tensor-active
-- estimate and the coverage over the $stepped rows.
SELECT $mfu, $hfu,
       sum(hfu_tensor_active * window_ns) FILTER (WHERE hfu_tensor_active IS NOT NULL)
           / nullif(sum(window_ns) FILTER (WHERE hfu_tensor_active IS NOT NULL), 0),
       sum(counted_ns), sum(kernel_ns), coalesce(sum(kernels_counted), 0)
FROM _mfu_rows WHERE $stepped

-- name: per_step
-- One row per step over the ranks' windows of that step ($mfu, $hfu: as in totals).
SELECT step, count(*), max(window_ns), $mfu, $hfu, sum(counted_ns), sum(kernel_ns)
FROM _mfu_rows WHERE step IS NOT NULL GROUP BY step ORDER BY step

-- name: per_rank
-- One row per rank over its $stepped windows ($mfu, $hfu: as in totals).
SELECT rank, count(*), $mfu, $hfu, sum(kernels_counted),
       sum(counted_ns), sum(kernel_ns), first(peak_source ORDER BY step NULLS FIRST)
FROM _mfu_rows WHERE $stepped GROUP BY rank ORDER BY rank

-- name: all_amd
-- Whether every rank's trace came from ROCm's tracer ($vendor: gpus.VENDOR_SQL).
SELECT count(*) > 0 AND bool_and(coalesce($vendor = 'amd', false))
FROM ranks r JOIN files f ON f.file_id = r.file_id

-- name: above_peak
-- The $stepped windows whose $column (mfu or hfu) is above 100 % of the peak, and their steps.
SELECT count(*), list(DISTINCT step ORDER BY step) FILTER (WHERE step IS NOT NULL)
FROM _mfu_rows WHERE ($stepped) AND $column > 1.0

-- name: trace_model_flops
-- The model FLOPs the $stepped rows hold from the trace's shapes, over how many steps and ranks.
SELECT sum(model_flops), count(DISTINCT step), count(DISTINCT rank)
FROM _mfu_rows WHERE ($stepped) AND model_flops IS NOT NULL
