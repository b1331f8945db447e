-- merge_coll_group_of(tbl): per matched instance (op, comm, seq), its cross-rank aggregates.
-- Why: shared by `collectives` (one row per instance) and merge_coll_members (joined back to
-- every participant); a macro so that the caller decides whether its input is materialized.
-- Input: name (string) of a relation with the columns of _merge_coll_arrivals.
-- Columns: op, comm, seq, coll_id BIGINT (1-based, ordered by op, comm, seq), n_ranks,
--   n_hosts, expected_ranks (max n_ranks over the same op, comm), first_arrive_ns,
--   last_arrive_ns, second_arrive_ns (second-latest arrival; NULL when alone), last_rank
--   (latest arrival; lowest rank on ties), first_end_ns, last_end_ns, median_end_ns DOUBLE,
--   min_duration_ns, max_bytes, key_source. Times in ns on the aligned timeline.
-- stage: live
-- requires: (nothing)
CREATE OR REPLACE MACRO merge_coll_group_of(tbl) AS TABLE
WITH cg AS (
    SELECT
        op, comm, seq,
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
        MIN(key_source) AS key_source
    FROM query_table(tbl)
    GROUP BY op, comm, seq
)
SELECT
    *,
    ROW_NUMBER() OVER (ORDER BY op, comm, seq) AS coll_id,
    MAX(n_ranks) OVER (PARTITION BY op, comm) AS expected_ranks
FROM cg;
