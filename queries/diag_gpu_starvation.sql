-- diag_gpu_starvation: long GPU idle gaps of each rank and device (nsys `gpu-starv` parity).
-- Why: a GPU that sits idle for hundreds of milliseconds between operations is starved by the
-- host (initialisation, checkpointing, evaluation, data loading, a blocked collective).
-- Input: macro parameter min_gap_ms (ms, default 500): list gaps strictly longer than this.
-- Columns: rank INTEGER, device_id INTEGER, start_ns BIGINT ns (gap start = end of the preceding
--   operation), end_ns BIGINT ns (start of the next one), duration_ns BIGINT ns,
--   nsys_rule VARCHAR ('gpu-starv').
-- Definition (nsys 2022.4): per (rank, device) the GPU operations (kernels, memcpy, memset with
--   start_ns > 0) are numbered twice, by start and by end; the j-th end is paired with the
--   (j+1)-th start, and the pair is a gap when start - end > min_gap_ms. Leading and trailing
--   idle time are not gaps. nsys also counts its own profiler-overhead ranges as busy; those
--   are not in the workspace, so a gap that nsys splits at such a range is listed whole here.
-- stage: live
-- requires: gpu_ops
CREATE OR REPLACE MACRO diag_gpu_starvation(min_gap_ms := 500) AS TABLE
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
SELECT e.rank, e.device_id, e.end_ns AS start_ns, s.start_ns AS end_ns, s.start_ns - e.end_ns AS duration_ns,
       'gpu-starv' AS nsys_rule
FROM e JOIN s ON s.rank = e.rank AND s.device_id IS NOT DISTINCT FROM e.device_id AND s.j = e.j + 1
WHERE s.start_ns - e.end_ns > min_gap_ms * 1000000;
