-- diag_low_util: stretches of the capture where the GPU was mostly idle (nsys `gpu-low-util` parity).
-- Why: coarse time-utilisation shows where in the run the GPU starved (warm-up, evaluation,
-- host-bound phases) before looking at individual gaps.
-- Input: macro parameters chunks (default 30) and max_util_pct (%, default 50).
-- Columns: rank INTEGER, device_id INTEGER, start_ns BIGINT ns, end_ns BIGINT ns,
--   duration_ns BIGINT ns (one low chunk or a run of adjacent low chunks), chunks BIGINT (how many),
--   in_use_pct DOUBLE % (rounded to 0.1 like nsys), busy_ns BIGINT ns (summed clipped op time),
--   nsys_rule VARCHAR ('gpu-low-util').
-- Definition (nsys 2022.4): per (rank, device), [first op start, last op end) is cut into `chunks`
--   chunks of ceil(span / chunks) ns (the last one is clipped to the span). In-use % of a chunk =
--   100 * (sum of the operations' durations clipped to the chunk) / chunk length: a *sum*, not a
--   union, so concurrent streams can exceed 100 %. Chunks below max_util_pct are kept; adjacent
--   kept chunks merge into one row whose in-use % is the length-weighted mean.
--   Operations: kernels, memcpy, memset with start_ns > 0 (nsys also counts its own profiler
--   overhead as busy; that is not in the workspace).
-- stage: live
-- requires: gpu_ops
CREATE OR REPLACE MACRO diag_low_util(chunks := 30, max_util_pct := 50) AS TABLE
WITH ops AS (
    SELECT rank, device_id, start_ns, end_ns FROM gpu_ops WHERE start_ns > 0
),
span AS (
    SELECT rank, device_id, min(start_ns) AS s0, max(end_ns) AS s1,
           CAST(ceil((max(end_ns) - min(start_ns)) / chunks) AS BIGINT) AS len
    FROM ops GROUP BY rank, device_id HAVING max(end_ns) > min(start_ns)
),
grid AS (
    SELECT sp.rank, sp.device_id, i AS idx, sp.s0 + i * sp.len AS c0,
           least(sp.s0 + (i + 1) * sp.len, sp.s1) AS c1
    FROM span sp, range(0, chunks) AS r(i)
    WHERE sp.s0 + i * sp.len < sp.s1
),
pieces AS (   -- each operation cut into the chunks it touches (index arithmetic, no range join)
    SELECT o.rank, o.device_id, o.start_ns, o.end_ns, sp.s0, sp.len,
           unnest(range((o.start_ns - sp.s0) // sp.len,
                        greatest((o.end_ns - 1 - sp.s0) // sp.len, (o.start_ns - sp.s0) // sp.len) + 1)) AS idx
    FROM ops o JOIN span sp ON sp.rank = o.rank AND sp.device_id IS NOT DISTINCT FROM o.device_id
),
busy AS (
    SELECT p.rank, p.device_id, p.idx,
           sum(greatest(least(p.end_ns, g.c1) - greatest(p.start_ns, g.c0), 0)) AS busy_ns
    FROM pieces p JOIN grid g ON g.rank = p.rank AND g.device_id IS NOT DISTINCT FROM p.device_id AND g.idx = p.idx
    GROUP BY ALL
),
low AS (
    SELECT g.rank, g.device_id, g.idx, g.c0, g.c1, coalesce(b.busy_ns, 0) AS busy_ns,
           g.idx - row_number() OVER (PARTITION BY g.rank, g.device_id ORDER BY g.idx) AS island
    FROM grid g LEFT JOIN busy b ON b.rank = g.rank AND b.device_id IS NOT DISTINCT FROM g.device_id AND b.idx = g.idx
    WHERE 100.0 * coalesce(b.busy_ns, 0) / (g.c1 - g.c0) < max_util_pct
)
SELECT rank, device_id, min(c0) AS start_ns, max(c1) AS end_ns, max(c1) - min(c0) AS duration_ns,
       count(*) AS chunks,
       round(100.0 * sum(busy_ns) / sum(c1 - c0), 1) AS in_use_pct,
       CAST(sum(busy_ns) AS BIGINT) AS busy_ns, 'gpu-low-util' AS nsys_rule
FROM low GROUP BY rank, device_id, island;
