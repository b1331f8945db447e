-- comm_overlap_by_op: per job and collective operation, how much of its time was hidden behind other GPU work.
-- Why: the report's "communication overlap" table, reachable with `nsight-analyze sql` like every
--   other number of the report; which collectives are worth overlapping first.
-- Columns:
--   job INTEGER              the ranks' job (ranks.job)
--   op VARCHAR               NCCL collective (nccl_kernels), else the operation's name
--   operations BIGINT        communication operations, all ranks of the job (whole capture)
--   comms_ns BIGINT ns       their summed durations
--   exposed_ns BIGINT ns     the part no compute/memory/other operation of the rank covered
--   exposed_wait_ns BIGINT ns  of that, the part spent waiting for the last participant; NULL when
--                            some of its operations' waits were not measured (diag_comm_exposure.
--                            wait_known: participants missing, e.g. a partial job), never a 0 that
--                            only the measured ones make
--   overlap_pct DOUBLE %     100 x (comms_ns - exposed_ns) / comms_ns
-- Definition: diag_comm_exposure, each operation once (one row per rank, start and name), grouped.
-- columns: job, op, operations, comms_ns, exposed_ns, exposed_wait_ns, overlap_pct
-- stage: job
-- result: stored
-- requires: diag_comm_exposure, ranks
CREATE OR REPLACE VIEW comm_overlap_by_op AS
SELECT r.job, e.op, count(*) AS operations, sum(e.duration_ns)::BIGINT AS comms_ns,
       sum(e.exposed_ns)::BIGINT AS exposed_ns,
       CASE WHEN bool_and(e.wait_known) THEN sum(e.exposed_wait_ns)::BIGINT END AS exposed_wait_ns,
       100.0 * (sum(e.duration_ns) - sum(e.exposed_ns)) / nullif(sum(e.duration_ns), 0) AS overlap_pct
FROM (SELECT DISTINCT ON (rank, start_ns, name) * FROM diag_comm_exposure) AS e
JOIN ranks AS r USING (rank)
GROUP BY r.job, e.op;
