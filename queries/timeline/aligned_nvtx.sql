-- aligned_nvtx: `nvtx` with times on the job's common timeline.
-- Why: NVTX ranges (steps, NCCL API calls) of different ranks are comparable only after
-- adding each rank's clock offset (session-start UTC shift refined per host).
-- Columns: every column of `nvtx`, plus
--   aligned_start_ns BIGINT ns = start_ns + ranks.clock_offset_ns (0 when the rank is unknown)
--   aligned_end_ns   BIGINT ns = end_ns + ranks.clock_offset_ns (NULL for marks)
-- columns: rank, tid, start_ns, end_ns, text, domain, event_type, payload, aligned_start_ns, aligned_end_ns
-- stage: live
-- requires: ranks, nvtx
CREATE OR REPLACE VIEW aligned_nvtx AS
SELECT
    t.*,
    t.start_ns + COALESCE(r.clock_offset_ns, 0) AS aligned_start_ns,
    t.end_ns + COALESCE(r.clock_offset_ns, 0) AS aligned_end_ns
FROM nvtx AS t
LEFT JOIN ranks AS r ON r.rank = t.rank;
