-- _whatif_dep_ord: for each NCCL kernel start, the position of the rank's work it followed.
-- Why: a collective that did not queue behind the previous one started when the rank's own work
--   before it was done; _whatif_inputs takes the median of that position over the participants.
--   Rank-local, so computed rank by rank (see _whatif_step_ops).
-- Columns: rank INTEGER, start_ns BIGINT ns (an NCCL kernel's start: merge_nccl_kernels, rank-local
--   clock), step BIGINT (the step window holding it), rev_ord BIGINT (the position in
--   _whatif_step_ends.ends of the step's operation ending last at or before start_ns: the first
--   position holding that end; NULL: none ends before it).
-- columns: rank, start_ns, step, rev_ord
-- stage: rank
-- result: stored
-- requires: _whatif_step_ends, _whatif_step_ops, merge_nccl_kernels, steps
CREATE OR REPLACE VIEW _whatif_dep_ord AS
WITH starts AS (  -- ASOF: a rank's windows are disjoint
    SELECT k.rank, k.start_ns, w.step
    FROM (SELECT DISTINCT rank, start_ns FROM merge_nccl_kernels WHERE start_ns IS NOT NULL) AS k
    ASOF JOIN (SELECT rank, step, start_ns, end_ns FROM steps WHERE step IS NOT NULL) AS w
        ON w.rank = k.rank AND k.start_ns >= w.start_ns
    WHERE k.start_ns < w.end_ns
)
SELECT s.rank, s.start_ns, s.step, list_position(e.ends, o.end_ns)::BIGINT AS rev_ord
FROM starts AS s
ASOF LEFT JOIN _whatif_step_ops AS o ON o.rank = s.rank AND o.step = s.step AND s.start_ns >= o.end_ns
LEFT JOIN _whatif_step_ends AS e ON e.rank = s.rank AND e.step = s.step;
