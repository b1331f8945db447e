-- The statements of the what-if and rank-attribution answers (nsight_analyze/whatif.py).

-- name: scenarios
-- The what-if rows: per job, scenario and step (NULL = the whole job, means over steps).
SELECT job, scenario, step, actual_step_time_ns, replayed_actual_ns, step_time_ns, gain_ns,
fixed_ranks FROM whatif

-- name: partial_jobs
-- The labels of the partial jobs (NULL when none).
SELECT string_agg(label, '; ') FROM jobs WHERE NOT complete

-- name: steps_on_every_rank
-- The (job, step) pairs present on every rank of the job: the replay couples all ranks.
SELECT count(*) FROM (SELECT r.job, s.step FROM steps AS s JOIN merge_rank_clock AS r USING (rank)
   WHERE s.step IS NOT NULL GROUP BY r.job, s.step
   HAVING count(*) = (SELECT count(*) FROM merge_rank_clock AS q WHERE q.job = r.job))

-- name: whatif_max_events
-- settings.whatif_max_events: the replay's event budget.
SELECT TRY_CAST(value AS BIGINT) FROM settings WHERE key = 'whatif_max_events'

-- name: attribution_columns
-- What an attribution row shows: the excess by cause and the evidence of each cause.
job, rank, step, cause, excess_ns, slow_gpu_ns, more_work_ns, slow_host_ns, late_input_ns,
slow_link_ns, gpu_score, kernels_compared, kernel_count, median_kernel_count, host_gap_ns,
median_host_gap_ns,
input_stall_ns, median_input_stall_ns, transfer_ns, median_transfer_ns, n_collectives, transfer_bytes,
threshold_ns

-- name: attribution_per_rank
-- Per rank, the whole job ($columns: attribution_columns).
SELECT $columns FROM rank_attribution WHERE step IS NULL ORDER BY job, rank, step NULLS FIRST

-- name: attribution_per_rank_and_step
-- Per rank, the whole job and each step ($columns: attribution_columns).
SELECT $columns FROM rank_attribution ORDER BY job, rank, step NULLS FIRST
