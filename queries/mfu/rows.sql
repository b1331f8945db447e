-- The statements of the MFU and HFU rows per rank and window (nsight_analyze/mfu/rows.py).

-- name: capture_windows
-- The whole capture of each rank: one window (step NULL) from its first to its last GPU operation.
(SELECT rank, NULL::BIGINT AS step, min(start_ns) AS start_ns, max(end_ns) AS end_ns
    FROM (SELECT rank, start_ns, end_ns FROM kernels UNION ALL SELECT rank, start_ns, end_ns FROM memops)
    GROUP BY rank)

-- name: step_windows
-- The windows of the steady steps (queries/steps/job_steps.sql); the whole-capture window (step NULL) too.
(SELECT s.rank, s.step, s.start_ns, s.end_ns FROM steps AS s JOIN ranks AS r USING (rank)
    LEFT JOIN job_steps AS j ON j.job = r.job AND j.step = s.step WHERE coalesce(j.steady, true))

-- name: step_sources
-- The steps held, where they came from, the one-time steps and the others.
SELECT count(*), list(DISTINCT source ORDER BY source) FILTER (WHERE source IS NOT NULL),
       count(DISTINCT step) FILTER (WHERE one_time), count(*) FILTER (WHERE NOT one_time) FROM steps

-- name: window_rows
-- The windows of a relation ($windows: given, steps or capture) in rank and step order.
SELECT * FROM $windows ORDER BY rank, step

-- name: op_flops_counted
-- Ops whose kernels ran: those whose FLOPs the trace's shapes give, and those whose they do not.
SELECT count(*) FILTER (WHERE flops IS NOT NULL), count(*) FILTER (WHERE flops IS NULL)
FROM op_flops WHERE kernels > 0

-- name: counter_kernel_counts
-- Nsight Compute launches and CUPTI range-profiler kernels in the workspace.
SELECT (SELECT count(*) FROM ncu_kernels), (SELECT count(*) FROM kineto_profiler_ranges)

-- name: kernels_uncounted
-- The bare kernels, no FLOPs: the kernel source when there is no counter data to match (fast path).
(SELECT rank, start_ns, duration_ns, category, NULL::DOUBLE AS flops, NULL::DOUBLE AS tensor_flops
 FROM kernels)

-- name: create_peaks
-- The rank peaks the rows join: a TEMP table of literals, not a registered DataFrame (DuckDB
-- imports pandas to register a Python object, and `mfu` imports none).
CREATE OR REPLACE TEMP TABLE _hfu_peaks
(rank BIGINT, peak_flops DOUBLE, source VARCHAR, clock_ref_mhz DOUBLE)

-- name: insert_peaks
-- $rows: the peaks' rows as literals (duck.sql_rows).
INSERT INTO _hfu_peaks VALUES $rows

-- name: windows_not_stored
-- The windows ($windows) that are not windows of the stored kernel totals (hfu_window_kernels).
SELECT count(*) FROM $windows w ANTI JOIN hfu_window_kernels h ON h.rank = w.rank
    AND h.step IS NOT DISTINCT FROM w.step AND h.start_ns = w.start_ns AND h.end_ns = w.end_ns

-- name: agg_scan
-- Per window: the kernels, their time and what the counters counted (FLOPs joined per kernel);
-- $kernels: hfu_timeline_flops or kernels_uncounted.
WITH k AS (
    SELECT rank, start_ns, duration_ns, flops, tensor_flops, coalesce(category = 'comms', false) AS is_comms
    FROM $kernels
)
SELECT w.rank, w.step, w.start_ns, w.end_ns,
        count(k.start_ns) FILTER (WHERE NOT k.is_comms) AS kernels,
        count(k.flops) FILTER (WHERE NOT k.is_comms) AS kernels_counted,
        coalesce(sum(k.duration_ns) FILTER (WHERE NOT k.is_comms), 0) AS kernel_ns,
        coalesce(sum(k.duration_ns) FILTER (WHERE NOT k.is_comms AND k.flops IS NOT NULL), 0) AS counted_ns,
        sum(k.flops) AS counted_flops,
        sum(k.tensor_flops) AS tensor_flops
    FROM w LEFT JOIN k ON k.rank = w.rank AND k.start_ns >= w.start_ns AND k.start_ns < w.end_ns
    GROUP BY ALL

-- name: agg_stored
-- No counter data, `steps` windows: the stored kernel totals (hfu_window_kernels), nothing counted.
SELECT w.rank, w.step, w.start_ns, w.end_ns, coalesce(h.kernels, 0) AS kernels,
    0::BIGINT AS kernels_counted, coalesce(h.kernel_ns, 0::HUGEINT) AS kernel_ns, 0::HUGEINT AS counted_ns,
    NULL::DOUBLE AS counted_flops, NULL::DOUBLE AS tensor_flops FROM w LEFT JOIN hfu_window_kernels h
    ON h.rank = w.rank AND h.step IS NOT DISTINCT FROM w.step AND h.start_ns = w.start_ns

-- name: hfu_rows
-- Counter-based HFU per rank and window ($windows) with the GPU metrics' tensor-activity
-- estimates; $agg: agg_scan or agg_stored, the kernels per window.
WITH w AS (SELECT rank, step, start_ns, end_ns FROM $windows),
agg AS ($agg),
gm AS (
    SELECT w.rank, w.step,
        avg(g.value) FILTER (WHERE g.metric_name ILIKE 'Tensor Active%') AS tensor_active_pct,
        avg(g.value) FILTER (WHERE g.metric_name ILIKE 'GPC Clock Frequency%') AS gpc_mhz,
        -- DCGM samples of the rank's GPU (sources/dcgm.match_ranks): ratio 0-1 -> %
        100.0 * avg(g.value) FILTER (WHERE g.metric_name = 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE')
            AS dcgm_tensor_active_pct,
        count(*) FILTER (WHERE g.metric_name = 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE') AS dcgm_samples,
        avg(g.value) FILTER (WHERE g.metric_name = 'DCGM_FI_DEV_SM_CLOCK') AS dcgm_sm_mhz
    FROM w JOIN gpu_metrics g
        ON g.rank = w.rank AND g.timestamp_ns >= w.start_ns AND g.timestamp_ns < w.end_ns
    GROUP BY ALL
)
SELECT a.rank, a.step, a.start_ns, a.end_ns, (a.end_ns - a.start_ns) AS window_ns,
    a.kernels, a.kernels_counted, a.kernel_ns, a.counted_ns,
    CASE WHEN a.kernel_ns > 0 THEN 100.0 * a.counted_ns / a.kernel_ns END AS coverage_pct,
    a.counted_flops, a.tensor_flops,
    p.peak_flops, p.source AS peak_source,
    a.counted_flops / nullif((a.end_ns - a.start_ns) * 1e-9 * p.peak_flops, 0) AS hfu,
    gm.tensor_active_pct, gm.gpc_mhz,
    gm.tensor_active_pct / 100.0 * coalesce(gm.gpc_mhz / nullif(p.clock_ref_mhz, 0), 1.0)
        AS hfu_tensor_active,
    gm.dcgm_tensor_active_pct, coalesce(gm.dcgm_samples, 0) AS dcgm_samples,
    -- an estimate: tensor-pipe activity x dense peak (precision-blind, clock-scaled)
    gm.dcgm_tensor_active_pct / 100.0 * coalesce(gm.dcgm_sm_mhz / nullif(p.clock_ref_mhz, 0), 1.0)
        AS hfu_dcgm_estimate,
    gm.dcgm_tensor_active_pct / 100.0 * coalesce(gm.dcgm_sm_mhz / nullif(p.clock_ref_mhz, 0), 1.0)
        * (a.end_ns - a.start_ns) * 1e-9 * p.peak_flops AS dcgm_estimated_flops,
    gm.dcgm_tensor_active_pct / nullif(gm.tensor_active_pct, 0) AS dcgm_over_nsys_tensor_active
FROM agg a
LEFT JOIN _hfu_peaks p ON p.rank = a.rank
LEFT JOIN gm ON gm.rank = a.rank AND gm.step IS NOT DISTINCT FROM a.step

-- name: hfu_rows_ordered
-- The HFU rows ($hfu: hfu_rows) in rank and step order.
SELECT * FROM ($hfu) ORDER BY rank, step NULLS FIRST

-- name: no_op_flops
-- The op_flops stand-in when the workspace has no such table (mfu_rows then reads no row of it).
(SELECT NULL::INTEGER AS rank, NULL::BIGINT AS first_kernel_ns, NULL::DOUBLE AS flops, 0 AS kernels)

-- name: mfu_rows
-- MFU beside HFU ($hfu: hfu_rows): a step window gets the model FLOPs per step / n_gpus
-- ($per_gpu, a literal; $world: n_gpus), a whole-capture window that times the steps it holds when stated
-- ($steps), else none. From the trace's shapes ($trace: true or false): each window gets the
-- FLOPs of the rank's ops ($op_flops: op_flops or no_op_flops) whose first kernel starts in it,
-- 0 when none does, and NULL on a rank without any counted op (unknown, not zero).
WITH h AS ($hfu),
tf AS (
    SELECT h.rank, h.step, h.start_ns, sum(o.flops) AS flops
    FROM h JOIN $op_flops o ON o.rank = h.rank AND o.first_kernel_ns >= h.start_ns
        AND o.first_kernel_ns < h.end_ns
    WHERE $trace AND o.flops IS NOT NULL
    GROUP BY ALL
),
shaped AS (SELECT DISTINCT rank FROM $op_flops WHERE $trace AND flops IS NOT NULL AND kernels > 0),
m AS (
    SELECT h.*, $world::BIGINT AS n_gpus,
        CASE WHEN $trace THEN CASE WHEN h.rank IN (SELECT rank FROM shaped) THEN coalesce(tf.flops, 0) END
             WHEN h.step IS NOT NULL THEN $per_gpu::DOUBLE
             WHEN $steps > 0 THEN $per_gpu::DOUBLE * $steps END::DOUBLE
            AS model_flops
    FROM h LEFT JOIN tf
        ON tf.rank = h.rank AND tf.step IS NOT DISTINCT FROM h.step AND tf.start_ns = h.start_ns
)
SELECT m.*, m.model_flops / nullif(m.window_ns * 1e-9 * m.peak_flops, 0) AS mfu
FROM m

-- name: mfu_rows_ordered
-- The MFU rows ($mfu: mfu_rows) in rank and step order.
$mfu ORDER BY rank, step NULLS FIRST

-- name: create_rows_table
-- The MFU rows ($mfu: mfu_rows) as the TEMP table the summary aggregates (rows.ROWS_TABLE).
CREATE OR REPLACE TEMP TABLE _mfu_rows AS $mfu
