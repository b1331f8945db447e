-- rank_step_work: per rank, step and kernel name, how many kernels ran and how long they took.
-- Why: attribution of a slow rank (rank_attribution) compares the same kernels across ranks step
-- by step: more of them is more work, longer ones a slow GPU.
-- Columns: rank INTEGER, step BIGINT (NVTX/detected step; never NULL), name VARCHAR (kernel name),
--   launch VARCHAR ('grid x,y,z block x,y,z'; '' when the trace has no launch shape): the same
--   name with another shape is another kernel (a GEMM of another size),
--   instances BIGINT, total_ns BIGINT ns, avg_ns DOUBLE ns, med_ns DOUBLE ns.
-- Definition: every kernel that is not communication (category <> 'comms') whose start lies in
--   the rank's step window [start_ns, end_ns) of `steps`.
-- columns: rank, step, name, launch, instances, total_ns, avg_ns, med_ns
-- stage: rank
-- result: stored
-- requires: kernels, steps
CREATE OR REPLACE VIEW rank_step_work AS
-- steps of one rank do not overlap, so each kernel's step is the last one starting at or before
-- it (ASOF), and the launch text is built once per group, not per kernel
WITH k AS (
    SELECT k.rank, s.step, k.name, k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z,
           k.end_ns - k.start_ns AS d
    FROM kernels AS k
    ASOF JOIN steps AS s ON s.rank = k.rank AND k.start_ns >= s.start_ns
    WHERE k.start_ns < s.end_ns AND s.step IS NOT NULL AND k.category IS DISTINCT FROM 'comms'
)
SELECT
    rank,
    step,
    name,
    coalesce('grid ' || grid_x || ',' || grid_y || ',' || grid_z
             || ' block ' || block_x || ',' || block_y || ',' || block_z, '') AS launch,
    count(*) AS instances,
    sum(d)::BIGINT AS total_ns,
    avg(d)::DOUBLE AS avg_ns,
    median(d)::DOUBLE AS med_ns
FROM k
GROUP BY rank, step, name, grid_x, grid_y, grid_z, block_x, block_y, block_z;
