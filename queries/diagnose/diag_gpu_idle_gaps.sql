-- diag_gpu_idle_gaps: every GPU idle gap longer than 1 ms of each rank and device, as nsys
--   `gpu-starv` pairs operations.
-- Why: diag_gpu_starvation (and the gpu-starvation finding) read these stored rows instead of
--   numbering every operation of the job again at read time; 1 ms is far below nsys' 500 ms default.
-- Columns: rank INTEGER, device_id INTEGER, start_ns BIGINT ns (end of the preceding operation),
--   end_ns BIGINT ns (start of the next one), duration_ns BIGINT ns.
-- Definition: _diag_gpu_gaps(1000000): per (rank, device) the j-th operation end paired with the
--   (j+1)-th operation start (kernels, memcpy, memset with start_ns > 0), kept when the gap is
--   longer than 1 ms.
-- columns: rank, device_id, start_ns, end_ns, duration_ns
-- stage: rank
-- result: stored
-- requires: _diag_gpu_gaps, gpu_ops
CREATE OR REPLACE VIEW diag_gpu_idle_gaps AS
SELECT rank, device_id, start_ns, end_ns, duration_ns FROM _diag_gpu_gaps(1000000);
