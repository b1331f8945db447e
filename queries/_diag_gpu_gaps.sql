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
-- How: the same pairs from one sort. When the (j+1)-th start lies after the j-th end, the j
--   smallest ends are those of the j operations that start first (any other ends after its own
--   start, so after the (j+1)-th start), and their largest is the j-th end. So a gap is an
--   operation that starts more than min_ns after every earlier-starting one ended, from the
--   latest of those ends. Two sorts and a join of every operation took 0.27-0.35 s against 0.11 s
--   for 8 ranks x 200k kernels (diag_gpu_idle_gaps over 64 such ranks: 2.4 -> 2.0 s, reading
--   gpu_ops included); the gaps are identical on every shared nsys and Kineto trace.
-- stage: live
-- requires: gpu_ops
CREATE OR REPLACE MACRO _diag_gpu_gaps(min_ns) AS TABLE
SELECT rank, device_id, prev_end AS start_ns, start_ns AS end_ns, start_ns - prev_end AS duration_ns
FROM (
    SELECT rank, device_id, start_ns,
           max(end_ns) OVER (PARTITION BY rank, device_id ORDER BY start_ns
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM gpu_ops
    WHERE start_ns > 0
)
WHERE start_ns - prev_end > min_ns;
