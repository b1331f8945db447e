-- collective_waits: per matched collective instance and participant, the time it waited.
-- Why: in a blocking collective every rank idles until the last one arrives; that wait
-- is the cost of imbalance as seen on the GPU, attributable to the last arrival.
-- Only complete instances appear: matched (at least two participants) with every participant
-- present (merge_coll_group_of.complete). A collective of a partial job whose missing ranks may
-- have arrived later, or a point-to-point kernel without its peer, has no wait to report.
-- Columns:
--   coll_id        BIGINT   see `collectives`
--   rank           INTEGER
--   arrive_ns      BIGINT   ns aligned, the rank's NCCL kernel start
--   wait_ns        BIGINT   ns, last arrival in the instance - arrive_ns (0 for the last rank)
--   last_rank      INTEGER  the rank everyone waited for (wait caused is charged to it)
--   last_margin_ns BIGINT   ns, and ranks BIGINT: see `collectives`
-- columns: coll_id, rank, arrive_ns, wait_ns, last_rank, last_margin_ns, ranks
-- stage: job
-- result: stored
-- requires: merge_coll_members, ranks
CREATE OR REPLACE VIEW collective_waits AS
SELECT
    coll_id,
    rank,
    arrive_ns,
    last_arrive_ns - arrive_ns AS wait_ns,
    last_rank::INTEGER AS last_rank,
    last_arrive_ns - second_arrive_ns AS last_margin_ns,
    n_ranks AS ranks
FROM merge_coll_members
WHERE complete;
