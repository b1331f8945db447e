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
--   From the stored gaps (diag_gpu_idle_gaps, > 1 ms) when min_gap_ms >= 1; below that the
--   operations are paired again (_diag_gpu_gaps).
-- stage: job
-- requires: diag_gpu_idle_gaps, _diag_gpu_gaps
CREATE OR REPLACE MACRO diag_gpu_starvation(min_gap_ms := 500) AS TABLE
SELECT rank, device_id, start_ns, end_ns, duration_ns, 'gpu-starv' AS nsys_rule
FROM (
    SELECT * FROM diag_gpu_idle_gaps WHERE min_gap_ms >= 1 AND duration_ns > min_gap_ms * 1000000
    UNION ALL
    SELECT * FROM _diag_gpu_gaps(min_gap_ms * 1000000) WHERE min_gap_ms < 1
);
