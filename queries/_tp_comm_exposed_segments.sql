-- _tp_comm_exposed_segments: the pieces of each rank's timeline where communication runs alone.
-- Why: diag_comm_exposure (a job-level table: it needs every rank's collective waits) splits
-- each NCCL operation's time into exposed and hidden parts; it reads these few segments instead
-- of the whole sweep, which is rank-local and is not kept.
-- Columns: rank INTEGER, start_ns BIGINT ns, end_ns BIGINT ns (rank-local clock).
-- Definition: the _tp_segments of the rank with comms running and no compute, memory or other.
-- stage: rank
-- result: stored
-- requires: _tp_segments
CREATE OR REPLACE VIEW _tp_comm_exposed_segments AS
SELECT rank, start_ns, end_ns FROM _tp_segments WHERE n > 0 AND c = 0 AND m = 0 AND o = 0;
