-- _diag_util_grid: each rank's GPU span cut into `n_chunks` equal chunks, with the operation time in
--   each (nsys `gpu-low-util`'s grid), from the operations themselves.
-- Why: one definition for the stored 30-chunk grid (diag_util_chunks) and for diag_low_util with
--   another chunk count.
-- Input: macro parameter n_chunks.
-- Columns: rank INTEGER, device_id INTEGER, idx BIGINT (chunk number from 0), c0 BIGINT ns,
--   c1 BIGINT ns (half-open chunk), busy_ns HUGEINT ns (summed clipped operation time; 0 when none).
-- Definition (nsys 2022.4): per (rank, device), [first op start, last op end) is cut into
--   chunks of ceil(span / n_chunks) ns (the last one is clipped to the span); busy = sum of the
--   operations' durations clipped to the chunk (a sum, not a union). Operations: kernels, memcpy,
--   memset with start_ns > 0; one without an end adds nothing (its time is not known).
-- stage: live
-- requires: gpu_ops
CREATE OR REPLACE MACRO _diag_util_grid(n_chunks) AS TABLE
WITH ops AS (
    SELECT rank, device_id, start_ns, end_ns FROM gpu_ops WHERE start_ns > 0
),
span AS (
    SELECT rank, device_id, min(start_ns) AS s0, max(end_ns) AS s1,
           CAST(ceil((max(end_ns) - min(start_ns)) / n_chunks) AS BIGINT) AS len
    FROM ops GROUP BY rank, device_id HAVING max(end_ns) > min(start_ns)
),
grid AS (
    SELECT sp.rank, sp.device_id, i AS idx, sp.s0 + i * sp.len AS c0,
           least(sp.s0 + (i + 1) * sp.len, sp.s1) AS c1
    FROM span sp, range(0, n_chunks) AS r(i)
    WHERE sp.s0 + i * sp.len < sp.s1
),
cut AS (   -- each operation's first and last chunk (index arithmetic, no range join)
    SELECT o.rank, o.device_id, o.start_ns, o.end_ns, (o.start_ns - sp.s0) // sp.len AS i0,
           greatest((o.end_ns - 1 - sp.s0) // sp.len, (o.start_ns - sp.s0) // sp.len) AS i1
    FROM ops o JOIN span sp ON sp.rank = o.rank AND sp.device_id IS NOT DISTINCT FROM o.device_id
),
busy AS (
    -- an operation inside one chunk (nearly all) adds its duration to it; only those that
    -- cross a chunk boundary are cut into the chunks they touch
    SELECT rank, device_id, idx, sum(b) AS busy_ns
    FROM (
        SELECT rank, device_id, i0 AS idx, greatest(end_ns - start_ns, 0) AS b FROM cut WHERE i1 = i0
        UNION ALL
        SELECT p.rank, p.device_id, p.idx, greatest(least(p.end_ns, g.c1) - greatest(p.start_ns, g.c0), 0)
        FROM (SELECT *, unnest(range(i0, i1 + 1)) AS idx FROM cut WHERE i1 > i0) AS p
        JOIN grid g ON g.rank = p.rank AND g.device_id IS NOT DISTINCT FROM p.device_id AND g.idx = p.idx
    )
    GROUP BY ALL
)
SELECT g.rank, g.device_id, g.idx, g.c0, g.c1, coalesce(b.busy_ns, 0) AS busy_ns
FROM grid g LEFT JOIN busy b ON b.rank = g.rank AND b.device_id IS NOT DISTINCT FROM g.device_id AND b.idx = g.idx;
