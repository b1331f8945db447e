-- diag_util_chunks: each rank's GPU span in 30 equal chunks with the operation time in each
--   (nsys `gpu-low-util`'s grid at its default chunk count).
-- Why: diag_low_util (and the gpu-low-utilisation finding) read these 30 rows per rank and device
--   instead of cutting every operation of the job into chunks again at read time.
-- Columns: rank INTEGER, device_id INTEGER, idx BIGINT (chunk number from 0), c0 BIGINT ns,
--   c1 BIGINT ns (half-open chunk), busy_ns HUGEINT ns (summed clipped operation time; 0 when none).
-- Definition: _diag_util_grid(30).
-- columns: rank, device_id, idx, c0, c1, busy_ns
-- stage: rank
-- result: stored
-- requires: _diag_util_grid, gpu_ops
CREATE OR REPLACE VIEW diag_util_chunks AS
SELECT rank, device_id, idx, c0, c1, busy_ns FROM _diag_util_grid(30);
