-- merge_rank_rollup_of(tp, imb): one row per rank: where it sits in time, how much it computes, who waits for whom.
-- Why: the `ranks` command and the report need, per rank, the alignment it got, its
-- compute time, the collective wait it suffered and caused, and whether it is the
-- straggler, side by side.
-- Input: tp = name of a relation (rank, step, compute_ns) like time_partition; imb = name of
--   merge_imbalance_of(tp)'s result (both strings; CTE names work).
-- Columns:
--   rank INTEGER, job INTEGER (see `jobs`), host VARCHAR, device_id INTEGER, gpu_name VARCHAR
--   clock_offset_ns    BIGINT ns  offset added to the rank's file times (ranks.clock_offset_ns)
--   alignment_method   VARCHAR    session-start | collectives | none
--   residual_p50_ns    BIGINT ns  median |aligned end - instance median end| over its complete collectives
--   residual_p95_ns    BIGINT ns  95th percentile of the same
--   compute_ns         BIGINT ns  time_partition.compute_ns of the whole capture (step NULL)
--   collectives        BIGINT     complete collective instances it took part in (every participant present)
--   unmatched          BIGINT     its NCCL kernels that no other rank matched
--   incomplete         BIGINT     its NCCL kernels matched with other ranks while participants are
--                                 missing (a partial job): no wait is counted for them
--   peer_unknown       BIGINT     its point-to-point kernels whose peer is unknown (not paired;
--                                 included in unmatched)
--   wait_suffered_ns   BIGINT ns  sum of its collective_waits.wait_ns
--   wait_caused_ns     BIGINT ns  sum of the other ranks' waits in instances where it arrived last
--   times_last         BIGINT     complete instances where it arrived last
--   cost_ns            BIGINT ns  GPU-ns the other ranks of its job lose to it: sum of imbalance.wait_gpu_ns
--                                 over the steps where it is the slowest (sum over ranks of max - own compute).
--                                 Unlike wait_caused_ns, it excludes waiting hidden behind compute.
--   times_slowest      BIGINT     steps (imbalance) where it had the most compute
--   verdict            VARCHAR    its job's: balanced | persistent | rotating | unknown
--   straggler          BOOLEAN    it is its job's persistent straggler
-- stage: job
-- requires: collectives, merge_coll_members, merge_rank_clock, merge_verdict_of, ranks
CREATE OR REPLACE MACRO merge_rank_rollup_of(tp, imb) AS TABLE
WITH mr_m AS MATERIALIZED (
    SELECT rank, aligned_end_ns, median_end_ns, n_ranks, complete, key_source, arrive_ns, last_arrive_ns,
           last_rank
    FROM merge_coll_members
),
mr_resid AS (
    SELECT
        rank,
        CAST(ROUND(QUANTILE_DISC(ABS(aligned_end_ns - median_end_ns), 0.5) FILTER (WHERE complete)) AS BIGINT) AS p50,
        CAST(ROUND(QUANTILE_DISC(ABS(aligned_end_ns - median_end_ns), 0.95) FILTER (WHERE complete)) AS BIGINT) AS p95,
        COUNT(*) FILTER (WHERE complete) AS collectives,
        COUNT(*) FILTER (WHERE n_ranks < 2) AS unmatched,
        COUNT(*) FILTER (WHERE n_ranks >= 2 AND NOT complete) AS incomplete,
        COUNT(*) FILTER (WHERE key_source = 'peer-unknown') AS peer_unknown
    FROM mr_m
    GROUP BY rank
),
mr_suffered AS (
    SELECT rank, SUM(last_arrive_ns - arrive_ns) AS wait_suffered_ns FROM mr_m WHERE complete GROUP BY rank
),
mr_caused AS (
    SELECT
        last_rank AS rank,
        SUM(last_arrive_ns - arrive_ns) AS wait_caused_ns,
        COUNT(*) FILTER (WHERE rank = last_rank) AS times_last
    FROM mr_m
    WHERE complete
    GROUP BY last_rank
),
mr_slowest AS (
    SELECT slowest_rank AS rank, COUNT(*) AS times_slowest, SUM(wait_gpu_ns) AS cost_ns
    FROM query_table(imb) WHERE step IS NOT NULL AND ranks >= 2
    GROUP BY slowest_rank
),
mr_comp AS (
    SELECT rank, compute_ns FROM query_table(tp) WHERE step IS NULL
),
mr_verdict AS (
    SELECT * FROM merge_verdict_of(imb)
)
SELECT
    r.rank, c.job, c.host, r.device_id, r.gpu_name, c.clock_offset_ns, c.alignment_method,
    mr_resid.p50 AS residual_p50_ns, mr_resid.p95 AS residual_p95_ns,
    mr_comp.compute_ns::BIGINT AS compute_ns,
    COALESCE(mr_resid.collectives, 0) AS collectives,
    COALESCE(mr_resid.unmatched, 0) AS unmatched,
    COALESCE(mr_resid.incomplete, 0) AS incomplete,
    COALESCE(mr_resid.peer_unknown, 0) AS peer_unknown,
    COALESCE(mr_suffered.wait_suffered_ns, 0)::BIGINT AS wait_suffered_ns,
    COALESCE(mr_caused.wait_caused_ns, 0)::BIGINT AS wait_caused_ns,
    COALESCE(mr_caused.times_last, 0) AS times_last,
    COALESCE(mr_slowest.cost_ns, 0)::BIGINT AS cost_ns,
    COALESCE(mr_slowest.times_slowest, 0) AS times_slowest,
    v.verdict,
    COALESCE(r.rank = v.straggler_rank, FALSE) AS straggler
FROM ranks AS r
JOIN merge_rank_clock AS c ON c.rank = r.rank
LEFT JOIN mr_resid ON mr_resid.rank = r.rank
LEFT JOIN mr_suffered ON mr_suffered.rank = r.rank
LEFT JOIN mr_caused ON mr_caused.rank = r.rank
LEFT JOIN mr_slowest ON mr_slowest.rank = r.rank
LEFT JOIN mr_comp ON mr_comp.rank = r.rank
LEFT JOIN mr_verdict AS v ON v.job = c.job
ORDER BY r.rank;
