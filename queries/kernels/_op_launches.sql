-- _op_launches: every GPU operation of the rank batch with the CUDA API call that launched it.
-- Why: launch_stats, tp_step_ops and nvtx_gpu_projection each paired every operation with its
--   launch call, a hash join of millions of rows each (0.6 s per query at 16 ranks x 200k
--   kernels); the batch computes it once.
-- Columns: rank INTEGER, kernel BOOLEAN (the operation is a kernel, not a memcpy or memset),
--   start_ns, end_ns BIGINT ns (the GPU operation), launched BOOLEAN (a launch call was found),
--   tid BIGINT, launch_ns, launch_end_ns BIGINT ns (the launch call's thread, start and end; NULL
--   when none was found).
-- Definition: gpu_ops LEFT JOIN cuda_api on rank and correlation_id. Only what its readers use:
--   the table is written once per batch and its width is its cost (a flag, not the op's name, and
--   no duration: 0.38-0.48 s -> 0.29-0.41 s for 16 ranks x 200k kernels).
-- columns: rank, kernel, start_ns, end_ns, launched, tid, launch_ns, launch_end_ns
-- stage: rank
-- result: step
-- requires: gpu_ops, cuda_api
CREATE OR REPLACE VIEW _op_launches AS
SELECT o.rank, o.op = 'kernel' AS kernel, o.start_ns, o.end_ns, a.correlation_id IS NOT NULL AS launched,
       a.tid, a.start_ns AS launch_ns, a.end_ns AS launch_end_ns
FROM gpu_ops AS o
LEFT JOIN cuda_api AS a ON a.rank = o.rank AND a.correlation_id = o.correlation_id;
