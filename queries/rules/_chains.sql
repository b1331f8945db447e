-- The statements of the per-step worst rank of the kernel-level findings (nsight_analyze/rules/_chains.py).

-- name: per_rank_step
-- The value per rank and step of a query yielding rows (rank, step, v) ($per_rank_step).
SELECT rank, step, sum(v) AS v FROM ($per_rank_step) GROUP BY ALL
