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
--   The grid is the stored one (diag_util_chunks) for the default 30 chunks; another chunk count
--   cuts the operations again (_diag_util_grid).
-- stage: job
-- requires: diag_util_chunks, _diag_util_grid
CREATE OR REPLACE MACRO diag_low_util(chunks := 30, max_util_pct := 50) AS TABLE
WITH grid AS (
    SELECT * FROM diag_util_chunks WHERE chunks = 30
    UNION ALL
    SELECT * FROM _diag_util_grid(chunks) WHERE chunks <> 30
),
low AS (
    SELECT rank, device_id, idx, c0, c1, busy_ns,
           idx - row_number() OVER (PARTITION BY rank, device_id ORDER BY idx) AS island
    FROM grid
    WHERE 100.0 * busy_ns / (c1 - c0) < max_util_pct
)
SELECT rank, device_id, min(c0) AS start_ns, max(c1) AS end_ns, max(c1) - min(c0) AS duration_ns,
       count(*) AS chunks,
       round(100.0 * sum(busy_ns) / sum(c1 - c0), 1) AS in_use_pct,
       CAST(sum(busy_ns) AS BIGINT) AS busy_ns, 'gpu-low-util' AS nsys_rule
FROM low GROUP BY rank, device_id, island;
