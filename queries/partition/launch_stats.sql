-- launch_stats: how fast each rank's host feeds its GPU (one row per rank with kernels).
-- Why: small kernels whose launch costs more than they run make a GPU launch-bound; latency and
-- queue depth tell whether the host keeps ahead of the GPU (deep queue) or not (depth ~ 0).
-- Columns: rank INTEGER, kernels BIGINT, launched_kernels BIGINT (with a launch call found),
--   launch_latency_p50_ns, launch_latency_p95_ns BIGINT ns (kernel start - end of its launch call;
--   negative when the kernel starts before the call returns; discrete quantiles),
--   cpu_launch_ns BIGINT ns (summed duration of the kernels' launch calls),
--   gpu_kernel_ns BIGINT ns (summed kernel durations), cpu_gpu_ratio DOUBLE (cpu / gpu),
--   short_kernel_pct DOUBLE % (kernels shorter than 10 us),
--   launch_bound_pct DOUBLE % (launched kernels shorter than their own launch call),
--   queue_depth_mean DOUBLE: operations launched but not yet started on the GPU, time-weighted
--   mean over [first launch or operation start, last one).
-- Definition: launch call = cuda_api row with the same rank and correlation_id. Queue depth
--   (as HTA): +1 at the start of the launch call of each GPU operation (kernels and memops),
--   -1 when that operation starts on the GPU; its time-weighted mean = sum of (operation start -
--   launch call start) / span. (The maximum would need a second sweep: not computed, for speed.)
-- columns: rank, kernels, launched_kernels, launch_latency_p50_ns, launch_latency_p95_ns, cpu_launch_ns, gpu_kernel_ns, cpu_gpu_ratio, short_kernel_pct, launch_bound_pct, queue_depth_mean
-- stage: rank
-- result: stored
-- requires: _op_launches, kernels
CREATE OR REPLACE VIEW launch_stats AS
WITH launched AS (
    SELECT rank, kernel, end_ns - start_ns AS duration_ns, start_ns, launch_ns AS a_start,
           launch_end_ns AS a_end
    FROM _op_launches
),
per_rank AS (
    SELECT
        rank,
        count(*) AS kernels,
        count(a_start) AS launched_kernels,
        quantile_disc(start_ns - a_end, 0.5) AS launch_latency_p50_ns,
        quantile_disc(start_ns - a_end, 0.95) AS launch_latency_p95_ns,
        coalesce(sum(a_end - a_start), 0) AS cpu_launch_ns,
        sum(duration_ns) AS gpu_kernel_ns,
        100.0 * count(*) FILTER (WHERE duration_ns < 10000) / count(*) AS short_kernel_pct,
        100.0 * count(*) FILTER (WHERE duration_ns < a_end - a_start) / nullif(count(a_start), 0)
            AS launch_bound_pct
    FROM launched
    WHERE kernel
    GROUP BY rank
),
queue AS (
    -- every operation is queued during [launch call start, operation start), so the time-weighted
    -- mean depth is the summed queueing time over the span; no sweep needed
    SELECT rank,
           sum(start_ns - a_start) / nullif(greatest(max(start_ns), max(a_start)) - least(min(start_ns), min(a_start)), 0)
               AS queue_depth_mean
    FROM launched
    WHERE a_start IS NOT NULL
    GROUP BY rank
)
SELECT
    p.rank, p.kernels, p.launched_kernels,
    p.launch_latency_p50_ns::BIGINT AS launch_latency_p50_ns,
    p.launch_latency_p95_ns::BIGINT AS launch_latency_p95_ns,
    p.cpu_launch_ns::BIGINT AS cpu_launch_ns,
    p.gpu_kernel_ns::BIGINT AS gpu_kernel_ns,
    p.cpu_launch_ns / nullif(p.gpu_kernel_ns, 0)::DOUBLE AS cpu_gpu_ratio,
    p.short_kernel_pct, p.launch_bound_pct,
    q.queue_depth_mean::DOUBLE AS queue_depth_mean
FROM per_rank AS p
LEFT JOIN queue AS q USING (rank);
