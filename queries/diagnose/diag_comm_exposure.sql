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
--   operation ending last in its rank's step), wait_known BOOLEAN (whether wait_ns was measured:
--   TRUE for an NCCL kernel whose instance is complete, and for a peer copy (no participants to
--   wait for); FALSE for an NCCL kernel whose instance lacks participants (a partial job, a
--   point-to-point kernel without its peer) and for other collective kernels (symmetric-memory or
--   custom all-reduce, DeepEP: never matched across ranks): their wait_ns and exposed_wait_ns are
--   0 but their true wait is unknown), dimension VARCHAR (comm_groups.dimension
--   of the NCCL kernel's communicator: dp | fsdp | tp | pp | ep | unknown; NULL for an operation
--   that is not an NCCL kernel).
-- Definition: exposed segments = _tp_segments with n > 0 and c = m = o = 0; each comms operation of
--   gpu_ops is intersected with them (the rank's exposed time at its end minus that at its start,
--   computed rank by rank: _diag_comm_ops). Concurrent comms operations each count the shared
--   exposed time.
-- columns: rank, step, bucket, op, name, start_ns, end_ns, duration_ns, wait_ns, exposed_ns, exposed_wait_ns, is_last, wait_known, dimension
-- stage: job
-- result: stored
-- requires: _diag_comm_ops, _tp_comm_exposed_segments, _exposed_at, diag_window_bounds, merge_coll_members, _comm_members, comm_groups
CREATE OR REPLACE VIEW diag_comm_exposure AS
WITH ops AS (
    SELECT g.rank, w.step, g.start_ns, g.end_ns, g.end_ns - g.start_ns AS duration_ns, g.name,
           g.correlation_id, g.op, g.exposed_before_start_ns AS b0, g.exposed_before_end_ns AS b1,
           CASE WHEN mc.complete
                THEN least(greatest(mc.last_arrive_ns - mc.arrive_ns, 0), g.end_ns - g.start_ns) ELSE 0 END
               AS wait_ns,
           CASE WHEN mc.rank IS NOT NULL THEN coalesce(mc.complete, FALSE)  -- an NCCL kernel
                WHEN g.name LIKE '[CUDA memcpy %' THEN TRUE  -- a peer copy: no rendezvous
                ELSE FALSE END AS wait_known  -- other collective kernels are never matched across ranks
    FROM _diag_comm_ops g
    -- ASOF: a rank's windows are disjoint, so the one holding a start is the last one starting
    -- at or before it (a hash join on the rank compares every operation with every window)
    ASOF JOIN (SELECT * FROM diag_window_bounds WHERE end_ns > start_ns) AS w
        ON w.rank = g.rank AND g.start_ns >= w.start_ns
    LEFT JOIN merge_coll_members mc ON mc.rank = g.rank AND mc.correlation_id = g.correlation_id
    WHERE g.start_ns < w.end_ns
),
dims AS (  -- the dimension of each NCCL kernel's communicator (one per rank, start and end)
    SELECT m.rank, m.start_ns, m.end_ns, min(cg.dimension) AS dimension
    FROM _comm_members AS m
    JOIN comm_groups AS cg ON cg.job = m.job AND cg.group_key = m.group_key
    GROUP BY m.rank, m.start_ns, m.end_ns
),
waited AS (  -- the exposed time before start + wait (the wait is the job's: it is computed here)
    SELECT o.*,
           _exposed_at(o.start_ns + o.wait_ns, s.exposed_before_ns, s.start_ns, s.end_ns) AS b2
    FROM ops AS o
    ASOF LEFT JOIN _tp_comm_exposed_segments AS s ON s.rank = o.rank AND o.start_ns + o.wait_ns >= s.start_ns
)
SELECT rank, step,
       row_number() OVER (PARTITION BY rank, step ORDER BY start_ns, correlation_id) - 1 AS bucket,
       op, name, start_ns, end_ns, duration_ns, wait_ns,
       CAST(b1 - b0 AS BIGINT) AS exposed_ns,
       -- operations alike in rank, times and correlation id (a CUDA graph's kernels share their
       -- launch's) take the longest wait among them
       CAST(max(b2) OVER (PARTITION BY rank, start_ns, end_ns, correlation_id) - b0 AS BIGINT) AS exposed_wait_ns,
       row_number() OVER (PARTITION BY rank, step ORDER BY end_ns DESC, correlation_id DESC) = 1 AS is_last,
       wait_known, dimension
FROM waited
LEFT JOIN dims USING (rank, start_ns, end_ns);
