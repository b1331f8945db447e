-- The statements of the `fusion-candidates` finding (nsight_analyze/rules/fusion_candidates.py).
-- $min_kernels: the fusion_min_kernels threshold, the shortest chain that counts.

-- name: recoverable_per_rank_step
-- Per chain, its span less its longest kernel: what fusing it saves (rules/_chains.py sums it per
-- rank and step).
SELECT rank, step, (end_ns - start_ns) - max_kernel_ns AS v FROM kernel_chains
WHERE kind = 'fusion' AND in_window AND kernels >= $min_kernels

-- name: chain_totals
-- The chains, their kernels, span, kernel time and gaps over the job.
SELECT count(*) AS chains, sum(kernels) AS kernels, min(kernels) AS shortest,
       max(kernels) AS longest,
       sum(end_ns - start_ns) AS span_ns, sum(busy_ns) AS busy_ns,
       sum(end_ns - start_ns - busy_ns) AS gap_ns, sum(graph_kernels) AS graph_kernels,
       median(busy_ns / kernels) AS median_kernel_ns
FROM kernel_chains WHERE kind = 'fusion' AND in_window AND kernels >= $min_kernels

-- name: chains_by_kernels
-- The chains grouped by the kernels they run, with what fusing each saves.
SELECT names, kernels, count(*) AS chains, list(DISTINCT rank ORDER BY rank) AS ranks,
       list(DISTINCT step ORDER BY step) AS steps, sum(busy_ns) AS kernel_ns,
       sum(end_ns - start_ns) AS span_ns,
       sum(end_ns - start_ns - max_kernel_ns) AS recoverable_ns
FROM kernel_chains WHERE kind = 'fusion' AND in_window AND kernels >= $min_kernels
GROUP BY names, kernels ORDER BY recoverable_ns DESC, kernels DESC, names

-- name: chains_per_rank_step
-- Chains, kernels and recoverable time per rank and step window.
SELECT rank, step, count(*) AS chains, sum(kernels) AS kernels, sum(busy_ns) AS kernel_ns,
       sum(end_ns - start_ns - max_kernel_ns) AS recoverable_ns
FROM kernel_chains WHERE kind = 'fusion' AND in_window AND kernels >= $min_kernels
GROUP BY rank, step ORDER BY rank, step
