-- _diag_comm_ops: each rank's communication operations with the rank's exposed communication
-- time before their start and before their end.
-- Why: diag_comm_exposure is a job-level table (it needs every rank's collective waits), but
--   everything about an operation except its wait and its step window is rank-local; computed
--   here, rank by rank, the job step reads these few rows instead of every GPU operation of the
--   job (gpu_ops: 12.8M rows at 64 ranks x 200k kernels, 0.35 s of a 0.8 s query).
-- Columns: rank INTEGER, start_ns, end_ns BIGINT ns (rank-local clock), name VARCHAR,
--   correlation_id BIGINT, op VARCHAR (NCCL collective from nccl_kernels, else the name),
--   exposed_before_start_ns, exposed_before_end_ns BIGINT ns (the rank's exposed communication
--   time before the operation's start and before its end: _tp_comm_exposed_segments).
-- Definition: the gpu_ops of category comms that last longer than 0 ns; the exposed time before
--   t is exposed_before_ns + least(t, end_ns) - start_ns of the last exposed segment starting at
--   or before t, 0 without one.
-- columns: rank, start_ns, end_ns, name, correlation_id, op, exposed_before_start_ns, exposed_before_end_ns
-- stage: rank
-- result: stored
-- requires: gpu_ops, nccl_kernels, _tp_comm_exposed_segments, _exposed_at
CREATE OR REPLACE VIEW _diag_comm_ops AS
SELECT g.rank, g.start_ns, g.end_ns, g.name, g.correlation_id,
       coalesce(nk.collective, g.name) AS op,
       _exposed_at(g.start_ns, s0.exposed_before_ns, s0.start_ns, s0.end_ns)::BIGINT AS exposed_before_start_ns,
       _exposed_at(g.end_ns, s1.exposed_before_ns, s1.start_ns, s1.end_ns)::BIGINT AS exposed_before_end_ns
FROM gpu_ops AS g
LEFT JOIN nccl_kernels AS nk ON nk.rank = g.rank AND nk.correlation_id = g.correlation_id
                            AND nk.start_ns = g.start_ns
ASOF LEFT JOIN _tp_comm_exposed_segments AS s0 ON s0.rank = g.rank AND g.start_ns >= s0.start_ns
ASOF LEFT JOIN _tp_comm_exposed_segments AS s1 ON s1.rank = g.rank AND g.end_ns >= s1.start_ns
WHERE g.category = 'comms' AND g.end_ns > g.start_ns;
