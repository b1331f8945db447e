-- _comm_members: each NCCL kernel of comm_kernels with its job, host, group and matched instance.
-- Why: comm_groups and comm_ops both group the job's NCCL kernels by communicator; the group key
-- and the instance (for bus bandwidth) are decided once here.
-- Columns: those of comm_kernels, and
--   job INTEGER, host VARCHAR (clock domain), job_ranks BIGINT (ranks of the job present),
--   world_size INTEGER (ranks the job says it has, else job_ranks), job_complete BOOLEAN,
--   group_key  VARCHAR  the communicator: 'pg:<name>' (PyTorch process group, Kineto), NCCL's
--                       communicator id (NVTX payload), else the stream ordinal ('stream<i>')
--   identity   VARCHAR  kineto-pg | nccl-payload | none (no communicator identity)
--   coll_id    BIGINT   the matched instance (collectives.coll_id), NULL when not matched
--   n_ranks    BIGINT   participants found for that instance
-- stage: job
-- result: step
-- requires: comm_kernels, merge_rank_clock, merge_coll_members, jobs
CREATE OR REPLACE VIEW _comm_members AS
SELECT
    k.*,
    c.job::INTEGER AS job,
    c.host,
    j.ranks AS job_ranks,
    COALESCE(j.world_size, j.ranks)::INTEGER AS world_size,
    COALESCE(j.complete, TRUE) AS job_complete,
    CASE WHEN k.pg_name IS NOT NULL THEN 'pg:' || k.pg_name ELSE k.comm END AS group_key,
    CASE WHEN k.pg_name IS NOT NULL THEN 'kineto-pg'
         WHEN k.key_source IN ('nvtx-payload', 'nccl-api-id') THEN 'nccl-payload'
         ELSE 'none' END AS identity,
    m.coll_id,
    m.n_ranks
FROM comm_kernels AS k
JOIN merge_rank_clock AS c ON c.rank = k.rank
LEFT JOIN jobs AS j ON j.job = c.job
LEFT JOIN merge_coll_members AS m ON m.rank = k.rank AND m.correlation_id = k.correlation_id;
