-- _whatif_step_ends: the ends of each step's non-communication GPU operations, from the step's end.
-- Why: a queued collective of the replay was ready when the rank's own work at the position the
--   other ranks' work gave (_whatif_dep_ord's median) ended: _whatif_inputs looks it up here, one
--   list per step instead of one row per operation. Rank-local (see _whatif_step_ops).
-- Columns: rank INTEGER, step BIGINT, ends BIGINT[] ns (the ends of the step's operations in
--   _whatif_step_ops, the one starting last first; ties: the one ending last first). The position
--   in this list is the operation's position counted from the step's end.
-- columns: rank, step, ends
-- stage: rank
-- result: stored
-- requires: _whatif_step_ops
CREATE OR REPLACE VIEW _whatif_step_ends AS
SELECT rank, step, list(end_ns ORDER BY start_ns DESC, end_ns DESC) AS ends
FROM _whatif_step_ops
GROUP BY rank, step;
