-- _diag_gpu_gaps: the GPU idle gaps of each rank and device longer than min_ns (nsys `gpu-starv`'s
--   pairing), from the operations themselves.
-- Why: one definition for the stored gaps (diag_gpu_idle_gaps, above 1 ms) and for
--   diag_gpu_starvation with a threshold below that floor.
-- Input: macro parameter min_ns (ns): keep gaps strictly longer than this.
-- Columns: rank INTEGER, device_id INTEGER, start_ns BIGINT ns (end of the preceding operation),
--   end_ns BIGINT ns (start of the next one), duration_ns BIGINT ns.
-- Definition (nsys 2022.4): per (rank, device) the GPU operations (kernels, memcpy, memset with
--   start_ns > 0) are numbered twice, by start and by end; the j-th end is paired with the
--   (j+1)-th start, and the pair is a gap when start - end > min_ns.
-- stage: live
-- requires: gpu_ops
CREATE OR REPLACE MACRO _diag_gpu_gaps(min_ns) AS TABLE
WITH ops AS (
    SELECT rank, device_id, start_ns, end_ns FROM gpu_ops WHERE start_ns > 0
),
s AS (
    SELECT rank, device_id, start_ns,
           row_number() OVER (PARTITION BY rank, device_id ORDER BY start_ns) AS j
    FROM ops
),
e AS (
    SELECT rank, device_id, end_ns,
           row_number() OVER (PARTITION BY rank, device_id ORDER BY end_ns) AS j
    FROM ops
)
SELECT e.rank, e.device_id, e.end_ns AS start_ns, s.start_ns AS end_ns, s.start_ns - e.end_ns AS duration_ns
FROM e JOIN s ON s.rank = e.rank AND s.device_id IS NOT DISTINCT FROM e.device_id AND s.j = e.j + 1
WHERE s.start_ns - e.end_ns > min_ns;
