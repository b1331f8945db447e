-- comm_ops: per communicator and NCCL operation of a job, its cost (comm_groups split by op).
-- Why: `comms --by collective`: which operation of a group (e.g. the all-gathers or the
-- reduce-scatters of FSDP) carries the exposed time.
-- Columns: job INTEGER, group_key VARCHAR, dimension VARCHAR (the group's, see comm_groups), link
--   VARCHAR (the group's), op VARCHAR, kernels BIGINT, instances BIGINT, total_ns BIGINT ns,
--   exposed_ns BIGINT ns, bytes BIGINT, busbw_gbps DOUBLE: as in comm_groups, over this op's kernels
--   (`kernels` counts operations: NCCL kernels and copy-engine collectives, merge_nccl_kernels.engine).
-- columns: job, group_key, dimension, link, op, kernels, instances, total_ns, exposed_ns, bytes, busbw_gbps
-- stage: job
-- result: stored
-- requires: _comm_members, comm_groups, collectives
CREATE OR REPLACE VIEW comm_ops AS
WITH co_o AS (
    SELECT job, group_key, op,
           COUNT(*) AS kernels,
           COUNT(DISTINCT coll_id) AS instances,
           SUM(duration_ns)::BIGINT AS total_ns,
           SUM(exposed_ns)::BIGINT AS exposed_ns,
           SUM(bytes)::BIGINT AS bytes
    FROM _comm_members
    GROUP BY job, group_key, op
),
co_bw AS (
    SELECT m.job, m.group_key, m.op,
           SUM(c.busbw_gbps * c.transfer_ns) / NULLIF(SUM(c.transfer_ns) FILTER (WHERE c.busbw_gbps IS NOT NULL), 0)
               AS busbw_gbps
    FROM (SELECT DISTINCT job, group_key, op, coll_id FROM _comm_members WHERE coll_id IS NOT NULL) AS m
    JOIN collectives AS c ON c.coll_id = m.coll_id
    GROUP BY m.job, m.group_key, m.op
)
SELECT o.job, o.group_key, g.dimension, g.link, o.op, o.kernels, o.instances, o.total_ns, o.exposed_ns,
       o.bytes, b.busbw_gbps
FROM co_o AS o
JOIN comm_groups AS g ON g.job = o.job AND g.group_key = o.group_key
LEFT JOIN co_bw AS b ON b.job = o.job AND b.group_key = o.group_key AND b.op = o.op;
