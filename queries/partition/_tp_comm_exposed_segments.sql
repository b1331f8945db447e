-- _tp_comm_exposed_segments: the pieces of each rank's timeline where communication runs alone.
-- Why: diag_comm_exposure (a job-level table: it needs every rank's collective waits) splits
-- each NCCL operation's time into exposed and hidden parts; it reads these few segments instead
-- of the whole sweep, which is rank-local and is not kept.
-- Columns: rank INTEGER, start_ns BIGINT ns, end_ns BIGINT ns (rank-local clock),
--   exposed_before_ns BIGINT ns (the rank's exposed time before the segment).
-- Definition: the _tp_segments of the rank with comms running and no compute, memory or other.
--   The segments of a rank are disjoint, so the exposed time before any time t is
--   exposed_before_ns + least(t, end_ns) - start_ns of the last segment starting at or before t
--   (0 without one): an operation's exposed time is that at its end minus that at its start,
--   two ASOF joins instead of a range join of every operation with every segment.
-- stage: rank
-- result: stored
-- requires: _tp_segments, _comms_exposed
CREATE OR REPLACE VIEW _tp_comm_exposed_segments AS
SELECT rank, start_ns, end_ns,
       (coalesce(sum(end_ns - start_ns) OVER (PARTITION BY rank ORDER BY start_ns
                                               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0))::BIGINT
           AS exposed_before_ns
FROM _tp_segments WHERE _comms_exposed(c, m, o, n);
