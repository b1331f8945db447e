-- merge_coll_group_of(tbl): per matched instance (job, op, comm, seq), its cross-rank aggregates.
-- Why: shared by `collectives` (one row per instance) and merge_coll_members (joined back to
-- every participant); a macro so that the caller decides whether its input is materialized.
-- Input: name (string) of a relation with the columns of _merge_coll_arrivals.
-- Columns: job, op, comm, seq, coll_id BIGINT (1-based, ordered by job, op, comm, seq), n_ranks,
--   n_hosts, expected_ranks (comm_size when known, else max n_ranks over the same job, op, comm),
--   first_arrive_ns, last_arrive_ns, second_arrive_ns (second-latest arrival; NULL when alone),
--   last_rank (latest arrival; lowest rank on ties), first_end_ns, last_end_ns, median_end_ns DOUBLE,
--   min_duration_ns, max_bytes, key_source, comm_size (participants it must have, NULL when
--   unknown), complete BOOLEAN: all its participants are present, so waits and skew are real:
--   n_ranks >= 2 and (n_ranks >= comm_size when comm_size is known, else its job is complete).
--   Times in ns on the aligned timeline.
-- stage: live
-- requires: (nothing)
CREATE OR REPLACE MACRO merge_coll_group_of(tbl) AS TABLE
WITH cg AS (
    SELECT
        job, op, comm, seq,
        COUNT(*) AS n_ranks,
        COUNT(DISTINCT host) AS n_hosts,
        MIN(arrive_ns) AS first_arrive_ns,
        MAX(arrive_ns) AS last_arrive_ns,
        (MAX(arrive_ns, 2))[2] AS second_arrive_ns,
        ARG_MAX(rank, (arrive_ns, -rank))::INTEGER AS last_rank,
        MIN(aligned_end_ns) AS first_end_ns,
        MAX(aligned_end_ns) AS last_end_ns,
        MEDIAN(aligned_end_ns)::DOUBLE AS median_end_ns,
        MIN(duration_ns) AS min_duration_ns,
        MAX(bytes) AS max_bytes,
        MIN(key_source) AS key_source,
        MAX(comm_size)::INTEGER AS comm_size,
        COUNT(*) >= 2 AND CASE WHEN MAX(comm_size) IS NOT NULL THEN COUNT(*) >= MAX(comm_size)
                               ELSE BOOL_AND(job_complete) END AS complete
    FROM query_table(tbl)
    GROUP BY job, op, comm, seq
)
SELECT
    *,
    ROW_NUMBER() OVER (ORDER BY job, op, comm, seq) AS coll_id,
    COALESCE(comm_size, MAX(n_ranks) OVER (PARTITION BY job, op, comm)) AS expected_ranks
FROM cg;
