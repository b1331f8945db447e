-- aligned_cuda_api: `cuda_api` with times on the job's common timeline.
-- Why: host-side calls of different ranks can only be compared after adding each rank's
-- clock offset (session-start UTC shift refined per host from collectives).
-- Columns: every column of `cuda_api`, plus
--   aligned_start_ns BIGINT ns = start_ns + ranks.clock_offset_ns (0 when the rank is unknown)
--   aligned_end_ns   BIGINT ns = end_ns + ranks.clock_offset_ns
-- columns: rank, tid, start_ns, end_ns, duration_ns, name, correlation_id, return_value, api_class, aligned_start_ns, aligned_end_ns
-- stage: live
-- requires: ranks, cuda_api
CREATE OR REPLACE VIEW aligned_cuda_api AS
SELECT
    t.*,
    t.start_ns + COALESCE(r.clock_offset_ns, 0) AS aligned_start_ns,
    t.end_ns + COALESCE(r.clock_offset_ns, 0) AS aligned_end_ns
FROM cuda_api AS t
LEFT JOIN ranks AS r ON r.rank = t.rank;
