-- The statements of the `exposed-comm-<dim>` findings and the per-dimension breakdown
-- (nsight_analyze/rules/dimensions.py). $where: step IS NOT NULL, or step IS NULL in a job without
-- steps; $dimension: a quoted literal.

-- name: parent_recoverable
-- The `exposed-comm` finding's recoverable time summed over steps (rules/comms.py's measure).
SELECT sum(r) FROM (SELECT min(recoverable_ns) AS r FROM diag_comm_recoverable GROUP BY step)

-- name: breakdown
-- The per-dimension split of the exposed communication; $steps: the job's steps (at least 1).
SELECT g.dimension, g.communicators, g.link, g.total_ns, g.exposed_ns, g.bytes,
       round(g.busbw_gbps, 1) AS busbw_gbps, r.recoverable_ns_per_step
FROM (SELECT dimension, count(*) AS communicators, string_agg(DISTINCT link, ',') AS link,
             sum(total_ns)::BIGINT AS total_ns, sum(exposed_ns)::BIGINT AS exposed_ns,
             sum(bytes)::BIGINT AS bytes,
             sum(busbw_gbps * total_ns)
                 / nullif(sum(total_ns) FILTER (WHERE busbw_gbps IS NOT NULL), 0) AS busbw_gbps
      FROM comm_groups GROUP BY dimension) AS g
LEFT JOIN (SELECT dimension,
                  round(sum(r) / $steps)::BIGINT AS recoverable_ns_per_step
           FROM (SELECT dimension, step, min(recoverable_ns) AS r FROM diag_comm_dimension
                 WHERE $where GROUP BY dimension, step) GROUP BY dimension) AS r
     USING (dimension)
ORDER BY g.exposed_ns DESC

-- name: dimensions
SELECT DISTINCT dimension FROM comm_groups WHERE total_ns > 0

-- name: recoverable_per_dimension_step
-- Per dimension and step, the critical rank's overlap-recoverable part and the step's length.
SELECT d.dimension, d.step, min(d.recoverable_ns) AS rec, max(w.step_ns) AS step_ns
FROM diag_comm_dimension AS d
JOIN (SELECT step, max(window_ns) AS step_ns FROM diag_windows GROUP BY step) AS w
  ON w.step IS NOT DISTINCT FROM d.step
WHERE d.$where GROUP BY d.dimension, d.step

-- name: dimension_totals
-- The dimension's communicators summed over ranks; bus bandwidth time-weighted.
SELECT count(*) AS communicators, string_agg(DISTINCT link, ',' ORDER BY link) AS link,
       sum(total_ns)::BIGINT AS total_ns, sum(exposed_ns)::BIGINT AS exposed_ns,
       sum(bytes)::BIGINT AS bytes,
       sum(busbw_gbps * total_ns) / nullif(sum(total_ns) FILTER (WHERE busbw_gbps IS NOT NULL), 0)
           AS busbw_gbps
FROM comm_groups WHERE dimension = $dimension

-- name: dimension_waits
-- The dimension's exposed time, its wait for the last rank, the last reduction's transfer and the
-- exposed time whose wait was not measured.
SELECT sum(exposed_ns) AS exposed, sum(exposed_wait_ns) AS wait, sum(last_transfer_ns) AS last,
       sum(unknown_wait_ns)
           + coalesce(sum(last_transfer_ns) FILTER (WHERE NOT last_transfer_known), 0) AS unknown
FROM diag_comm_dimension WHERE dimension = $dimension AND $where

-- name: dimension_ranks
-- The ranks whose recoverable part of the dimension reaches $th % of their window.
SELECT DISTINCT d.rank FROM diag_comm_dimension AS d
JOIN diag_windows AS w ON w.rank = d.rank AND w.step IS NOT DISTINCT FROM d.step
WHERE d.dimension = $dimension AND d.$where
  AND 100.0 * d.recoverable_ns / nullif(w.window_ns, 0) >= $th ORDER BY 1

-- name: communicators
SELECT group_key, basis, ops, size, members, hosts, link, kernels, total_ns, exposed_ns,
       bytes, round(busbw_gbps, 1) AS busbw_gbps
FROM comm_groups WHERE dimension = $dimension ORDER BY exposed_ns DESC, group_key

-- name: exposed_per_step
SELECT step, min(recoverable_ns) AS recoverable_ns,
       arg_min(rank, recoverable_ns) AS critical_rank, max(exposed_ns) AS max_exposed_ns,
       CASE WHEN bool_and(unknown_wait_ns = 0 AND last_transfer_known)
            THEN max(exposed_wait_ns) END AS max_exposed_wait_ns,
       CASE WHEN bool_and(last_transfer_known) THEN max(last_transfer_ns) END
           AS max_last_transfer_ns,
       max(unknown_wait_ns) AS max_unknown_wait_ns, sum(kernels) AS kernels
FROM diag_comm_dimension WHERE dimension = $dimension AND $where
GROUP BY step ORDER BY step
