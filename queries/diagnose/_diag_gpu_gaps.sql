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
--   gpu_ops included); the gaps are identical on every shared nsys and Kineto trace. The running
--   max is one streaming pass after one sort, not a partitioned window: 16 ranks x 200k kernels,
--   0.65-0.68 s of CPU against 1.07-1.17 s at the same wall time (docs/architecture.md, Queries).
-- stage: live
-- requires: gpu_ops
CREATE OR REPLACE MACRO _diag_gpu_gaps(min_ns) AS TABLE
WITH parts AS (  -- each (rank, device) a number, in sort order (a few rows)
    SELECT rank, device_id, row_number() OVER (ORDER BY rank, device_id) AS p
    FROM (SELECT DISTINCT rank, device_id FROM gpu_ops WHERE start_ns > 0)
),
pass AS (  -- one sort and a streaming pass (an empty OVER keeps the ORDER BY's order): the
           -- running max of (part, end) packed in 128 bits, beside the next operation's start
    SELECT p, rank, device_id,
           max((p::HUGEINT << 64) + (end_ns::HUGEINT + 9223372036854775808)) OVER (ROWS UNBOUNDED PRECEDING)
               AS run_max,
           lead(p) OVER () AS next_p, lead(start_ns) OVER () AS next_start
    FROM (SELECT pa.p, o.rank, o.device_id, o.start_ns, o.end_ns
          FROM gpu_ops AS o
          JOIN parts AS pa ON pa.rank IS NOT DISTINCT FROM o.rank AND pa.device_id IS NOT DISTINCT FROM o.device_id
          WHERE o.start_ns > 0
          ORDER BY pa.p, o.start_ns)
),
ends AS (  -- the latest end so far in this part (none when every earlier end is NULL)
    SELECT rank, device_id, next_start,
           ((run_max & 18446744073709551615::HUGEINT) - 9223372036854775808)::BIGINT AS prev_end
    FROM pass
    WHERE next_p = p AND run_max >> 64 = p
)
SELECT rank, device_id, prev_end AS start_ns, next_start AS end_ns, next_start - prev_end AS duration_ns
FROM ends
WHERE next_start - prev_end > min_ns;
