-- alignment_quality: per job and clock domain (host), the offset applied and how well it fits.
-- Why: clock alignment is an estimate; the residual is what remains of the matched
-- collectives' end mismatch after alignment and must be reported, never hidden.
-- Columns:
--   job                INTEGER  see `jobs` (a host's clock is aligned within its job only)
--   host               VARCHAR  hostname (or 'file<id>' when unknown)
--   offset_ns          BIGINT   ns, refinement added on top of the session-start (UTC) offset,
--                               relative to the host of the job's lowest rank (0 = not refined)
--   session_offset_ns  BIGINT   ns, smallest session-start offset among the host's ranks
--   residual_p50_ns    BIGINT   ns, median over complete matched instances (merge_coll_members.complete)
--                               and the host's participants of |aligned end - instance median aligned
--                               end|; NULL without any
--   residual_p95_ns    BIGINT   ns, 95th percentile of the same
--   collectives_used   BIGINT   complete instances spanning this and another host (what
--                               refinement can use); 0 for a lone host
--   method             VARCHAR  collectives | session-start | none
--   ranks              BIGINT   ranks on the host
-- columns: job, host, offset_ns, session_offset_ns, residual_p50_ns, residual_p95_ns, collectives_used, method, ranks
-- stage: job
-- result: stored
-- requires: merge_coll_members, merge_rank_clock, ranks
CREATE OR REPLACE VIEW alignment_quality AS
WITH h AS (
    SELECT job, host, MAX(correction_ns) AS offset_ns, MIN(session_offset_ns) AS session_offset_ns,
           MIN(alignment_method) AS method, COUNT(*) AS ranks
    FROM merge_rank_clock
    GROUP BY job, host
),
r AS (
    SELECT
        job, host,
        QUANTILE_DISC(ABS(aligned_end_ns - median_end_ns), 0.5) AS p50,
        QUANTILE_DISC(ABS(aligned_end_ns - median_end_ns), 0.95) AS p95,
        COUNT(DISTINCT (op, comm, seq)) FILTER (WHERE n_hosts >= 2) AS used
    FROM merge_coll_members
    WHERE complete
    GROUP BY job, host
)
SELECT
    h.job,
    h.host,
    h.offset_ns,
    h.session_offset_ns,
    CAST(ROUND(r.p50) AS BIGINT) AS residual_p50_ns,
    CAST(ROUND(r.p95) AS BIGINT) AS residual_p95_ns,
    COALESCE(r.used, 0) AS collectives_used,
    h.method,
    h.ranks
FROM h
LEFT JOIN r ON r.job = h.job AND r.host = h.host
ORDER BY h.job, h.host;
