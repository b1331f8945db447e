-- The statements of communication by parallelism dimension (nsight_analyze/comms.py).

-- name: exposed_families
-- Per job, dimension and family of collectives ($family: rules/comm_families.py's FAMILY_SQL) with
-- exposed time: its ops, its exposed time and share of the dimension's, the dimension's total.
SELECT job, dimension, family, string_agg(DISTINCT op, ',' ORDER BY op) AS ops,
       any_value(dimension) AS dimensions, sum(exposed_ns)::BIGINT AS exposed_ns,
       sum(exposed_ns) / nullif(sum(sum(exposed_ns)) OVER d, 0) AS share,
       sum(sum(exposed_ns)) OVER d::BIGINT AS dimension_exposed_ns
FROM (SELECT *, $family AS family FROM comm_ops)
GROUP BY job, dimension, family HAVING sum(exposed_ns) > 0
WINDOW d AS (PARTITION BY job, dimension)
ORDER BY dimension_exposed_ns DESC, job, dimension, exposed_ns DESC, family

-- name: gpu_models
-- The GPU models of the ranks (identified, else as the trace names them).
SELECT DISTINCT COALESCE(g.name, r.gpu_name) FROM ranks r LEFT JOIN gpus g ON g.rank = r.rank
WHERE COALESCE(g.name, r.gpu_name) IS NOT NULL

-- name: communicators
SELECT * FROM comm_groups ORDER BY job, dimension, group_key

-- name: communicator_collectives
SELECT * FROM comm_ops ORDER BY job, dimension, group_key, op

-- name: dimensions
-- comm_groups summed per (job, dimension), in $order (DIMENSIONS, a list literal); busbw weighted
-- by each group's total time (over the groups that have one); link: the groups' one link, else
-- 'mixed'.
SELECT job, dimension, count(group_key) AS communicators, sum(kernels) AS kernels,
       sum(total_ns) AS total_ns, sum(exposed_ns) AS exposed_ns, sum(bytes) AS bytes,
       sum(busbw_gbps * total_ns) FILTER (WHERE busbw_gbps IS NOT NULL)
           / nullif(sum(total_ns) FILTER (WHERE busbw_gbps IS NOT NULL), 0) AS busbw_gbps,
       CASE WHEN count(DISTINCT link) = 1 THEN min(link) ELSE 'mixed' END AS link
FROM comm_groups
GROUP BY job, dimension
ORDER BY job, list_position($order, dimension) NULLS LAST, dimension
