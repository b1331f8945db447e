-- diag_comm_dimension: per parallelism dimension, rank and step, the exposed communication that
-- better overlap could hide (diag_comm_recoverable, split by the dimension of each kernel).
-- Why: "communication is exposed" leads to different fixes per dimension (TP: keep it inside a
-- node / overlap it; DP: buckets; PP: micro-batches); the diagnosis needs, per dimension, the same
-- overlap-recoverable measure as the job-level finding, so that the dimensions' parts never
-- exceed the whole and waiting for a late rank or the last gradient reduction is excluded alike.
-- Columns: job INTEGER, dimension VARCHAR (comm_groups.dimension: dp | fsdp | tp | pp | ep | unknown),
--   rank INTEGER, step BIGINT (diag_windows step; NULL = whole capture), kernels BIGINT,
--   duration_ns BIGINT ns (sum of the dimension's kernel durations), exposed_ns BIGINT ns,
--   exposed_wait_ns BIGINT ns (exposed time waiting for the last arrival), last_transfer_ns BIGINT ns
--   (exposed, non-waiting part of the step's last comms operation when it is a reduction of this
--   dimension), recoverable_ns BIGINT ns = max(exposed - exposed_wait - last_transfer, 0),
--   unknown_wait_ns BIGINT ns (at most recoverable_ns) and last_transfer_known BOOLEAN: as in
--   diag_comm_recoverable, for this dimension's operations (an unmeasured wait: participants missing
--   from the workspace).
-- Definition: diag_comm_exposure rows (one per comms operation of a rank's step window) joined to
--   the NCCL kernel of _comm_members with the same rank, start and end, whose (job, group_key)
--   gives comm_groups.dimension; the sums per (job, dimension, rank, step) follow
--   diag_comm_recoverable. Comms operations that are not NCCL kernels (peer copies) have no
--   communicator and are left out.
-- columns: job, dimension, rank, step, kernels, duration_ns, exposed_ns, exposed_wait_ns, last_transfer_ns, recoverable_ns, unknown_wait_ns, last_transfer_known
-- stage: job
-- result: stored
-- requires: _comm_members, comm_groups, diag_comm_exposure
CREATE OR REPLACE VIEW diag_comm_dimension AS
WITH cd_k AS (
    SELECT m.rank, m.start_ns, m.end_ns, g.job, g.dimension
    FROM _comm_members AS m
    JOIN comm_groups AS g ON g.job = m.job AND g.group_key = m.group_key
),
cd_e AS (
    SELECT k.job, k.dimension, e.rank, e.step, e.duration_ns, e.exposed_ns, e.exposed_wait_ns,
           CASE WHEN e.is_last AND e.op IN ('AllReduce', 'ReduceScatter', 'Reduce')
                THEN greatest(e.exposed_ns - e.exposed_wait_ns, 0) ELSE 0 END AS last_transfer_ns,
           e.is_last AND e.op IN ('AllReduce', 'ReduceScatter', 'Reduce') AS last_reduction, e.wait_known
    FROM diag_comm_exposure AS e
    JOIN cd_k AS k ON k.rank = e.rank AND k.start_ns = e.start_ns AND k.end_ns = e.end_ns
)
SELECT job::INTEGER AS job, dimension, rank::INTEGER AS rank, step::BIGINT AS step,
       count(*)::BIGINT AS kernels,
       sum(duration_ns)::BIGINT AS duration_ns,
       sum(exposed_ns)::BIGINT AS exposed_ns,
       sum(exposed_wait_ns)::BIGINT AS exposed_wait_ns,
       sum(last_transfer_ns)::BIGINT AS last_transfer_ns,
       greatest(sum(exposed_ns) - sum(exposed_wait_ns) - sum(last_transfer_ns), 0)::BIGINT AS recoverable_ns,
       least(coalesce(sum(exposed_ns) FILTER (WHERE NOT wait_known AND NOT last_reduction), 0),
             greatest(sum(exposed_ns) - sum(exposed_wait_ns) - sum(last_transfer_ns), 0))::BIGINT AS unknown_wait_ns,
       NOT bool_or(last_reduction AND NOT wait_known) AS last_transfer_known
FROM cd_e
GROUP BY job, dimension, rank, step;
