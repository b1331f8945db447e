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
SELECT
    k.rank,
    s.step,
    k.name,
    coalesce('grid ' || k.grid_x || ',' || k.grid_y || ',' || k.grid_z
             || ' block ' || k.block_x || ',' || k.block_y || ',' || k.block_z, '') AS launch,
    count(*) AS instances,
    sum(k.end_ns - k.start_ns)::BIGINT AS total_ns,
    avg(k.end_ns - k.start_ns)::DOUBLE AS avg_ns,
    median(k.end_ns - k.start_ns)::DOUBLE AS med_ns
FROM kernels AS k
JOIN steps AS s ON s.rank = k.rank AND k.start_ns >= s.start_ns AND k.start_ns < s.end_ns
WHERE s.step IS NOT NULL AND k.category IS DISTINCT FROM 'comms'
GROUP BY ALL;
