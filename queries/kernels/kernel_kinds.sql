-- kernel_kinds: per rank, each kind of kernel (name, category and launch configuration) with
--   the key `kind` its instances carry in kernel_duration_counts.
-- Why: compare matches kernels across runs by name and judges them faster or slower within each
--   launch configuration from their per-instance durations (docs/compare.md "Kernels"); with
--   the durations counted per rank and kind once (kernel_duration_counts, keyed by an integer,
--   no name on its millions of rows), it reads this small table for the names instead of every
--   kernel of both runs.
-- Columns: rank INTEGER, kind UBIGINT (hash of name, category, grid_x..block_z: a key within this
--   workspace, never compared across workspaces), name VARCHAR, category VARCHAR, grid_x, grid_y,
--   grid_z, block_x, block_y, block_z INTEGER, instances BIGINT, total_ns BIGINT ns (summed
--   durations).
-- Definition: every kernel of the rank (all categories), duration = end_ns - start_ns.
-- columns: rank, kind, name, category, grid_x, grid_y, grid_z, block_x, block_y, block_z, instances, total_ns
-- stage: rank
-- result: stored
-- requires: kernels
CREATE OR REPLACE VIEW kernel_kinds AS
SELECT
    rank,
    hash(name, category, grid_x, grid_y, grid_z, block_x, block_y, block_z) AS kind,
    name,
    category,
    grid_x,
    grid_y,
    grid_z,
    block_x,
    block_y,
    block_z,
    count(*) AS instances,
    sum(end_ns - start_ns)::BIGINT AS total_ns
FROM kernels
GROUP BY rank, name, category, grid_x, grid_y, grid_z, block_x, block_y, block_z;
