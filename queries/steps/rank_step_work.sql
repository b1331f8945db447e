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
-- requires: _kernel_windows, _kernel_names
CREATE OR REPLACE VIEW rank_step_work AS
-- the launch text and the name are put back once per group, not per kernel
WITH g AS (
    SELECT rank, step, name_id, grid_x, grid_y, grid_z, block_x, block_y, block_z,
           count(*) AS instances, sum(end_ns - start_ns)::BIGINT AS total_ns,
           avg(end_ns - start_ns)::DOUBLE AS avg_ns, median(end_ns - start_ns)::DOUBLE AS med_ns
    FROM _kernel_windows
    WHERE step IS NOT NULL AND NOT comms
    GROUP BY rank, step, name_id, grid_x, grid_y, grid_z, block_x, block_y, block_z
)
SELECT g.rank, g.step, n.name,
       coalesce('grid ' || grid_x || ',' || grid_y || ',' || grid_z
                || ' block ' || block_x || ',' || block_y || ',' || block_z, '') AS launch,
       g.instances, g.total_ns, g.avg_ns, g.med_ns
FROM g
LEFT JOIN _kernel_names AS n USING (name_id);
