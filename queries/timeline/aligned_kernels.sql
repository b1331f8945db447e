-- aligned_kernels: `kernels` with times on the job's common timeline.
-- Why: raw start_ns/end_ns are on each rank's own file clock; cross-rank comparisons need
-- the rank's clock offset (session-start UTC shift refined per host from collectives).
-- Columns: every column of `kernels`, plus
--   aligned_start_ns BIGINT ns = start_ns + ranks.clock_offset_ns (0 when the rank is unknown)
--   aligned_end_ns   BIGINT ns = end_ns + ranks.clock_offset_ns
-- columns: rank, device_id, stream_id, start_ns, end_ns, duration_ns, name, short_name, correlation_id, grid_x, grid_y, grid_z, block_x, block_y, block_z, registers_per_thread, static_smem_bytes, dynamic_smem_bytes, graph_id, graph_node_id, category, subcategory, aligned_start_ns, aligned_end_ns
-- stage: live
-- requires: ranks, kernels
CREATE OR REPLACE VIEW aligned_kernels AS
SELECT
    t.*,
    t.start_ns + COALESCE(r.clock_offset_ns, 0) AS aligned_start_ns,
    t.end_ns + COALESCE(r.clock_offset_ns, 0) AS aligned_end_ns
FROM kernels AS t
LEFT JOIN ranks AS r ON r.rank = t.rank;
