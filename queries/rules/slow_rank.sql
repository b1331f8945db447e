-- The statements of the `slow-rank-<cause>` findings (nsight_analyze/rules/slow_rank.py).

-- name: blamed_ranks
-- The ranks rank_attribution blames a cause on, over the whole job.
SELECT * FROM rank_attribution WHERE step IS NULL AND cause IS NOT NULL ORDER BY rank

-- name: slowest_rank_gain
-- The what-if gain of the slowest rank(s) at the median rank's speed (whole job); no row: unknown.
SELECT gain_ns FROM whatif WHERE scenario = 'slowest-rank-at-median' AND step IS NULL
ORDER BY job LIMIT 1

-- name: cause_steps
-- The steps in which $cause (one of rank_attribution's causes) is blamed on the ranks $ranks (an
-- IN-list).
SELECT DISTINCT step FROM rank_attribution WHERE step IS NOT NULL AND cause = '$cause'
    AND rank IN ($ranks) ORDER BY step

-- name: attribution
SELECT rank, cause, excess_ns, slow_gpu_ns, more_work_ns, slow_host_ns,
       late_input_ns, slow_link_ns, round(gpu_score, 3) AS gpu_score,
       kernels_compared, kernel_count, median_kernel_count, host_gap_ns,
       median_host_gap_ns, transfer_ns, median_transfer_ns
FROM rank_attribution WHERE step IS NULL ORDER BY rank

-- name: whatif_whole_job
SELECT scenario, actual_step_time_ns, step_time_ns, gain_ns, fixed_ranks
FROM whatif WHERE step IS NULL ORDER BY gain_ns DESC
