-- aligned_memops: `memops` with times on the job's common timeline.
-- Why: raw start_ns/end_ns are on each rank's own file clock; cross-rank comparisons need
-- the rank's clock offset (session-start UTC shift refined per host from collectives).
-- Columns: every column of `memops`, plus
--   aligned_start_ns BIGINT ns = start_ns + ranks.clock_offset_ns (0 when the rank is unknown)
--   aligned_end_ns   BIGINT ns = end_ns + ranks.clock_offset_ns
-- columns: rank, device_id, stream_id, start_ns, end_ns, duration_ns, kind, bytes, src_kind, dst_kind, correlation_id, graph_node_id, aligned_start_ns, aligned_end_ns
-- stage: live
-- requires: ranks, memops
CREATE OR REPLACE VIEW aligned_memops AS
SELECT
    t.*,
    t.start_ns + COALESCE(r.clock_offset_ns, 0) AS aligned_start_ns,
    t.end_ns + COALESCE(r.clock_offset_ns, 0) AS aligned_end_ns
FROM memops AS t
LEFT JOIN ranks AS r ON r.rank = t.rank;
