-- _whatif_step_ops: each step's non-communication GPU operations.
-- Why: the what-if replay (_whatif_inputs) places a queued collective after the rank's own work
--   at the position where the other ranks' work let theirs start; the numbering is rank-local, so
--   it is computed here, rank by rank, and the job step reads only its two small results
--   (_whatif_dep_ord, _whatif_step_ends), not every GPU operation of the job.
-- Columns: rank INTEGER, step BIGINT, start_ns, end_ns BIGINT ns (the operation).
-- Definition: the gpu_ops of a category other than comms starting inside a step window of
--   `steps` (a rank's windows are disjoint: the last one starting at or before the operation);
--   the kernels' windows are _kernel_windows' (its join is not made twice).
-- stage: rank
-- result: step
-- requires: _kernel_windows, gpu_ops, steps
CREATE OR REPLACE VIEW _whatif_step_ops AS
WITH placed AS (
    SELECT rank, step, start_ns, end_ns
    FROM _kernel_windows
    WHERE step IS NOT NULL AND NOT comms
    UNION ALL
    SELECT o.rank, w.step, o.start_ns, o.end_ns
    FROM (SELECT rank, start_ns, end_ns FROM gpu_ops
          WHERE op <> 'kernel' AND category IS DISTINCT FROM 'comms') AS o
    ASOF JOIN (SELECT rank, step, start_ns, end_ns FROM steps WHERE step IS NOT NULL) AS w
        ON w.rank = o.rank AND o.start_ns >= w.start_ns
    WHERE o.start_ns < w.end_ns
)
SELECT rank, step, start_ns, end_ns FROM placed;
