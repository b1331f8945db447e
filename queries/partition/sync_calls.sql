-- sync_calls: every synchronising CUDA or HIP API call, with the GPU idle time it caused.
-- Why: syncs (explicit, synchronous copies, async copies of pageable memory) stall the host until
-- the GPU drains, then the GPU starves until the host launches again; this ranks them by cost.
-- Columns: rank INTEGER, tid BIGINT, start_ns, end_ns, duration_ns BIGINT ns, name VARCHAR,
--   correlation_id BIGINT, reason VARCHAR ('sync' | 'sync copy' | 'pageable async copy'),
--   gpu_idle_ns BIGINT ns: GPU idle time (whole-capture gaps, any cause) during the call;
--   sync_stall_ns BIGINT ns: sync_stall idle of the whole-capture partition attributed to this
--   call (the call a gap's sync_stall piece names in `gaps.host_activity`: the host stall
--   before the launch, or the wait after it).
-- Definition: the call list is _tp_sync_api (docs/metrics.md). gpu_idle_ns = F(end) - F(start)
--   with F(t) the idle time of the rank before t (prefix sums over start-sorted gaps, ASOF join).
-- columns: rank, tid, start_ns, end_ns, duration_ns, name, correlation_id, reason, gpu_idle_ns, sync_stall_ns
-- stage: rank
-- result: stored
-- requires: _tp_gap_spans, _tp_gaps, _tp_sync_api
CREATE OR REPLACE VIEW sync_calls AS
WITH g AS (
    SELECT rank, g0, g1,
           coalesce(sum(g1 - g0) OVER (PARTITION BY rank ORDER BY g0 ROWS BETWEEN UNBOUNDED PRECEDING
                                       AND 1 PRECEDING), 0) AS idle_before
    FROM _tp_gap_spans
    WHERE step IS NULL
),
at_start AS (
    SELECT s.rank, s.tid, s.start_ns, s.end_ns, s.name, s.correlation_id, s.reason,
           coalesce(g.idle_before + least(greatest(s.start_ns - g.g0, 0), g.g1 - g.g0), 0) AS f_start
    FROM _tp_sync_api AS s
    ASOF LEFT JOIN g ON g.rank = s.rank AND s.start_ns >= g.g0
),
at_end AS (
    SELECT s.*,
           coalesce(g.idle_before + least(greatest(s.end_ns - g.g0, 0), g.g1 - g.g0), 0) AS f_end
    FROM at_start AS s
    ASOF LEFT JOIN g ON g.rank = s.rank AND s.end_ns >= g.g0
),
stall AS (
    -- a gap's host stall and its wait after the launch may each name a call
    SELECT rank, sync_start_ns, name, sum(ns) AS sync_stall_ns
    FROM (
        SELECT rank, sync_start_ns, host_activity AS name, a_ns - g0 AS ns
        FROM _tp_gaps
        WHERE step IS NULL AND host_cause = 'sync_stall'
        UNION ALL
        SELECT rank, wait_sync_start_ns, wait_activity, g1 - w_ns
        FROM _tp_gaps
        WHERE step IS NULL AND wait_cause = 'sync_stall'
    )
    GROUP BY ALL
)
SELECT s.rank, s.tid, s.start_ns, s.end_ns, s.end_ns - s.start_ns AS duration_ns, s.name, s.correlation_id,
       s.reason, (s.f_end - s.f_start)::BIGINT AS gpu_idle_ns, coalesce(st.sync_stall_ns, 0)::BIGINT AS sync_stall_ns
FROM at_end AS s
LEFT JOIN stall AS st ON st.rank = s.rank AND st.sync_start_ns = s.start_ns AND st.name = s.name;
