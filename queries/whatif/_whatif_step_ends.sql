-- _whatif_step_ends: the ends of each step's non-communication GPU operations, from the step's end.
-- Why: a queued collective of the replay was ready when the rank's own work at the position the
--   other ranks' work gave (_whatif_dep_ord's median) ended: _whatif_inputs looks it up here, one
--   list per step instead of one row per operation. Rank-local (see _whatif_step_ops).
-- Columns: rank INTEGER, step BIGINT, ends BIGINT[] ns (the ends of the step's operations in
--   _whatif_step_ops, the one starting last first; ties: the one ending last first). The position
--   in this list is the operation's position counted from the step's end.
-- Definition: the list is gathered unordered and then sorted (list_sort of (-start, -end, end)
--   structs, compared field by field), not with an ordered aggregate: DuckDB keeps a sort state
--   per group for `list(... ORDER BY ...)`, which ran out of a 2 GB cap on one rank of 111k steps
--   (2M kernels); the same lists.
-- columns: rank, step, ends
-- stage: rank
-- result: stored
-- requires: _whatif_step_ops
CREATE OR REPLACE VIEW _whatif_step_ends AS
SELECT rank, step,
       list_transform(list_sort(list({'s': -start_ns, 'e': -end_ns, 'v': end_ns})), x -> x.v) AS ends
FROM _whatif_step_ops
GROUP BY rank, step;
