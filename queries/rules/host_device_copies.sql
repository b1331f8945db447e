-- The statements of the `host-device-copies` finding (nsight_analyze/rules/host_device_copies.py).

-- name: copies_in_windows
-- The HtoD/DtoH copies that start inside a step window, with the window's step.
SELECT k.rank, w.step, k.kind, k.bytes, k.src_kind, k.dst_kind, k.end_ns - k.start_ns AS
       duration_ns
FROM memops k JOIN diag_window_bounds w ON w.rank = k.rank AND k.start_ns >= w.start_ns AND k.start_ns < w.end_ns
WHERE k.kind IN ('HtoD', 'DtoH')

-- name: copy_time_per_window
-- Time with a copy in flight per window (union: copies on several streams overlap), clipped to it,
-- as rank, step, t, window_ns.
WITH c AS (SELECT {'rank': k.rank, 'step': w.step} AS k,
                  greatest(k.start_ns, w.start_ns) AS start_ns,
                  least(k.end_ns, w.end_ns) AS end_ns
           FROM memops k JOIN diag_window_bounds w ON w.rank = k.rank AND k.start_ns >= w.start_ns AND k.start_ns < w.end_ns
           WHERE k.kind IN ('HtoD', 'DtoH')),
     u AS (SELECT k.rank AS rank, k.step AS step, sum(end_ns - start_ns) AS t
           FROM interval_union('c') GROUP BY ALL)
SELECT u.rank, u.step, u.t, w.end_ns - w.start_ns AS window_ns
FROM u JOIN diag_window_bounds w ON w.rank = u.rank AND w.step IS NOT DISTINCT FROM u.step

-- name: copy_time_per_rank
-- Per rank, the time with a copy in flight over its windows ($per_window: copy_time_per_window).
SELECT rank, sum(t) AS t FROM ($per_window) GROUP BY rank

-- name: copies_per_rank_kind
-- Per rank and direction, the copies of copies_in_windows ($copies): count, bytes, time, achieved
-- bandwidth, pageable copies.
SELECT rank, kind, count(*) AS copies, sum(bytes) AS bytes, sum(duration_ns) AS total_ns,
       round(sum(bytes) / nullif(sum(duration_ns), 0), 2) AS gb_per_s,
       count(*) FILTER (WHERE 'Pageable' IN (src_kind, dst_kind)) AS pageable
FROM ($copies) GROUP BY rank, kind ORDER BY total_ns DESC, rank, kind

-- name: copy_stats
-- The same over every rank: copies, mean bytes, pageable copies, achieved bandwidth.
SELECT count(*) AS n, avg(bytes) AS avg_b,
       count(*) FILTER (WHERE 'Pageable' IN (src_kind, dst_kind)) AS pageable,
       sum(bytes) / nullif(sum(duration_ns), 0) AS gbps FROM ($copies)
