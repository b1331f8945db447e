-- diag_comm_exposure: every communication operation with how much of it was exposed, and why.
-- Why: exposed communication (comms running while no compute/memory/other work runs) is only
-- partly recoverable by better overlap: the part spent waiting for a late rank belongs to load
-- imbalance, and the transfer of the step's last collective has no later compute to hide behind.
-- Columns:
--   rank INTEGER, step BIGINT (the diag_windows step whose window holds the start; NULL = whole
--   capture), bucket BIGINT (0-based ordinal of the operation in the rank's step, by start),
--   op VARCHAR (NCCL collective from nccl_kernels, else the op name), name VARCHAR,
--   start_ns, end_ns, duration_ns BIGINT ns, wait_ns BIGINT ns (time from its arrival to the last
--   participant's arrival, from merge_coll_members; 0 unless the instance is complete: unmatched,
--   or participants missing (a partial job, a point-to-point kernel without its peer)), exposed_ns BIGINT ns
--   (part of the operation covered by no compute/memory/other operation of the rank),
--   exposed_wait_ns BIGINT ns (exposed part inside [start, start + wait)), is_last BOOLEAN (the
--   operation ending last in its rank's step).
-- Definition: exposed segments = _tp_segments with n > 0 and c = m = o = 0; each comms operation of
--   gpu_ops is intersected with them (the rank's exposed time at its end minus that at its start:
--   _tp_comm_exposed_segments). Concurrent comms operations each count the shared exposed time.
-- columns: rank, step, bucket, op, name, start_ns, end_ns, duration_ns, wait_ns, exposed_ns, exposed_wait_ns, is_last
-- stage: job
-- result: stored
-- requires: _tp_comm_exposed_segments, diag_window_bounds, gpu_ops, merge_coll_members, nccl_kernels
CREATE OR REPLACE VIEW diag_comm_exposure AS
WITH ops AS (
    SELECT g.rank, w.step, g.start_ns, g.end_ns, g.end_ns - g.start_ns AS duration_ns, g.name,
           g.correlation_id,
           coalesce(nk.collective, g.name) AS op,
           CASE WHEN mc.complete
                THEN least(greatest(mc.last_arrive_ns - mc.arrive_ns, 0), g.end_ns - g.start_ns) ELSE 0 END
               AS wait_ns
    FROM gpu_ops g
    -- ASOF: a rank's windows are disjoint, so the one holding a start is the last one starting
    -- at or before it (a hash join on the rank compares every operation with every window)
    ASOF JOIN (SELECT * FROM diag_window_bounds WHERE end_ns > start_ns) AS w
        ON w.rank = g.rank AND g.start_ns >= w.start_ns
    LEFT JOIN nccl_kernels nk ON nk.rank = g.rank AND nk.correlation_id = g.correlation_id
                              AND nk.start_ns = g.start_ns
    LEFT JOIN merge_coll_members mc ON mc.rank = g.rank AND mc.correlation_id = g.correlation_id
    WHERE g.category = 'comms' AND g.end_ns > g.start_ns AND g.start_ns < w.end_ns
),
pts AS (  -- the three times whose exposed time before them each operation needs
    SELECT rank, start_ns, end_ns, correlation_id,
           unnest([0, 1, 2]) AS k, unnest([start_ns, end_ns, start_ns + wait_ns]) AS t
    FROM ops
),
at_pts AS (
    SELECT p.rank, p.start_ns, p.end_ns, p.correlation_id, p.k,
           CASE WHEN p.t IS NOT NULL  -- no end: no exposed time
                THEN coalesce(s.exposed_before_ns + least(p.t, s.end_ns) - s.start_ns, 0) END AS before_t
    FROM pts AS p
    ASOF LEFT JOIN _tp_comm_exposed_segments AS s ON s.rank = p.rank AND p.t >= s.start_ns
),
ex AS (
    SELECT rank, start_ns, end_ns, correlation_id,
           max(before_t) FILTER (WHERE k = 1) - max(before_t) FILTER (WHERE k = 0) AS exposed_ns,
           max(before_t) FILTER (WHERE k = 2) - max(before_t) FILTER (WHERE k = 0) AS exposed_wait_ns
    FROM at_pts
    GROUP BY ALL
)
SELECT o.rank, o.step,
       row_number() OVER (PARTITION BY o.rank, o.step ORDER BY o.start_ns, o.correlation_id) - 1 AS bucket,
       o.op, o.name, o.start_ns, o.end_ns, o.duration_ns, o.wait_ns,
       CAST(coalesce(ex.exposed_ns, 0) AS BIGINT) AS exposed_ns,
       CAST(coalesce(ex.exposed_wait_ns, 0) AS BIGINT) AS exposed_wait_ns,
       row_number() OVER (PARTITION BY o.rank, o.step ORDER BY o.end_ns DESC, o.correlation_id DESC) = 1 AS is_last
FROM ops o
LEFT JOIN ex ON ex.rank = o.rank AND ex.start_ns = o.start_ns AND ex.end_ns = o.end_ns
            AND ex.correlation_id IS NOT DISTINCT FROM o.correlation_id;
