-- _tp_gaps: every gap of every window with the evidence that decides its cause (one row per gap).
-- Why: the idle time of the partition is split by what kept the GPU waiting; time_partition sums
-- these rows, and the `gaps` view cuts each into its pieces.
-- Columns: rank INTEGER, step BIGINT (NULL = whole capture), g0, g1 BIGINT ns (the gap),
--   a_ns BIGINT ns (split point: host stall [g0, a_ns), launch gap [a_ns, w_ns)),
--   w_ns BIGINT ns (end of the launch gap: g1, or the launch call's end when the operation then
--   waited [w_ns, g1) on something else; NULL when kind = 'idle_other'),
--   wait_cause VARCHAR: sync_stall | idle_other for the wait [w_ns, g1) (NULL: no wait),
--   wait_activity VARCHAR (the synchronising call, or why idle_other),
--   wait_sync_start_ns BIGINT ns (start of that synchronising call),
--   kind VARCHAR: 'idle_other' (whole gap) | 'host' (split at a_ns),
--   host_cause VARCHAR: input_stall | sync_stall | host_bound (when kind = 'host'),
--   host_activity VARCHAR (input range text, sync call name or the NVTX range on the launching
--   thread at a_ns), sync_start_ns BIGINT ns (start of the sync call named, for sync_stall),
--   launch_name VARCHAR (the launch call), other_reason VARCHAR,
--   correlation_id BIGINT (the operation that ends the gap).
-- Definition (docs/metrics.md "Idle causes"): the operation starting at g1 (smallest
--   correlation_id if several) and its launch call A. idle_other when the gap runs to the window
--   end, A is missing, or A.end_ns <= g0. Otherwise a = clamp(A.start_ns, g0, g1); [a, g1) is
--   launch_gap, except that when the operation started more than settings.dependency_wait_us
--   after A ended (w = clamp(A.end_ns, a, g1); g1 - w > the threshold), the launch call was
--   done and the GPU idle, so what kept the operation waiting [w, g1) was not the launch:
--   sync_stall if a synchronising call (_tp_sync_api) overlaps [w, g1) (the host sat blocked in
--   it), else idle_other (a device-side dependency: a stream/event wait such as
--   cudaStreamWaitEvent / hipStreamWaitEvent, named in wait_activity when the rank issued one
--   in [g0, A.start]); then [a, w) alone is launch_gap. [g0, a) is input_stall if it overlaps an
--   NVTX range matching settings.input_pattern, else sync_stall if a synchronising call (_tp_sync_api) ends in
--   [g0, a] or overlaps [g0, a), else host_bound (the input regex is compiled once when the session
--   variable input_pattern equals the setting, see _tp_nvtx_step_ranges). Range tests are ASOF joins against
--   start-sorted intervals carrying a running max of their ends (exact, no pairwise joins).
--   Each distinct gap (rank, g0, g1, at_window_end) is classified once, then given to every
--   window that has it (a capture gap and its step's gap are usually the same).
-- stage: rank
-- result: step
-- requires: _tp_gap_spans, _tp_sync_api, gpu_ops, cuda_api, nvtx, settings
CREATE OR REPLACE VIEW _tp_gaps AS
WITH spans AS (
    SELECT DISTINCT rank, g0, g1, at_window_end FROM _tp_gap_spans
),
nxt AS (
    SELECT g.rank, g.g0, g.g1, g.at_window_end,
           min(o.correlation_id) AS correlation_id, count(o.rank) AS n_ops
    FROM spans AS g
    LEFT JOIN gpu_ops AS o ON o.rank = g.rank AND o.start_ns = (CASE WHEN NOT g.at_window_end THEN g.g1 END)
    GROUP BY ALL
),
launch AS (
    -- the first launch call of the operation; calls that share its correlation id and start are
    -- ordered by all their columns, so rows stored in any order give the same call
    SELECT * EXCLUDE (first_call),
           first_call.end_ns AS a_end, first_call.tid AS a_tid, first_call.name AS a_name
    FROM (
        SELECT x.rank, x.g0, x.g1, x.at_window_end, x.correlation_id, x.n_ops,
               min(a.start_ns) AS a_start,
               arg_min({'end_ns': a.end_ns, 'tid': a.tid, 'name': a.name},
                       {'s': a.start_ns, 'e': a.end_ns, 't': a.tid, 'n': a.name}) AS first_call
        FROM nxt AS x
        LEFT JOIN cuda_api AS a ON a.rank = x.rank AND a.correlation_id = x.correlation_id
        GROUP BY ALL
    )
),
classified AS (
    SELECT *,
           CASE
               WHEN other_reason IS NULL AND a_ns > g0 THEN a_ns
           END AS host_end
    FROM (
        SELECT *,
               CASE
                   WHEN n_ops = 0 THEN 'gap runs to the window end'
                   WHEN a_start IS NULL THEN 'no launch call found'
                   WHEN a_end <= g0 THEN 'work was queued before the GPU went idle (dependency)'
               END AS other_reason,
               greatest(g0, least(a_start, g1)) AS a_ns,
               least(greatest(a_end, a_start, g0), g1) AS w_raw
        FROM launch
    )
),
cw AS (
    SELECT *,
           coalesce(other_reason IS NULL AND g1 - w_raw > (
               SELECT 1000 * TRY_CAST(value AS DOUBLE) FROM settings WHERE key = 'dependency_wait_us'
           ), other_reason IS NULL AND g1 - w_raw > 100000) AS long_wait
    FROM classified
),
waited AS (
    -- operations that found the GPU idle, were launched, and still started long after the launch
    -- call ended (few gaps): what they waited on; every other gap passes with no wait
    SELECT c.*,
           CASE WHEN c.other_reason IS NULL THEN (CASE WHEN c.long_wait THEN c.w_raw ELSE c.g1 END) END AS w_ns,
           CASE WHEN c.long_wait THEN (CASE WHEN ws.sync_call IS NOT NULL THEN 'sync_stall' ELSE 'idle_other' END)
           END AS wait_cause,
           CASE
               WHEN NOT c.long_wait THEN NULL
               WHEN ws.sync_call IS NOT NULL THEN ws.sync_call.name
               WHEN we.wait_name IS NOT NULL
                   THEN 'waited on an event after the launch (' || we.wait_name || '): a dependency'
               ELSE 'started long after its launch call ended: a device-side dependency'
           END AS wait_activity,
           CASE WHEN c.long_wait THEN ws.sync_call.start_ns END AS wait_sync_start_ns
    FROM cw AS c
    LEFT JOIN (
        SELECT l.rank, l.g0, l.g1, l.at_window_end,
               arg_min({'name': s.name, 'start_ns': s.start_ns}, {'s': s.start_ns, 'n': s.name}) AS sync_call
        FROM cw AS l
        JOIN _tp_sync_api AS s
            ON s.rank = l.rank AND s.start_ns < l.g1 AND s.end_ns > l.w_raw AND s.end_ns > s.start_ns
        WHERE l.long_wait
        GROUP BY ALL
    ) AS ws USING (rank, g0, g1, at_window_end)
    LEFT JOIN (
        SELECT l.rank, l.g0, l.g1, l.at_window_end,
               arg_max(regexp_replace(a.name, '_v\d+$', ''), {'s': a.start_ns, 'n': a.name}) AS wait_name
        FROM cw AS l
        JOIN cuda_api AS a
            ON a.rank = l.rank AND a.start_ns >= l.g0 AND a.start_ns <= l.a_start
        WHERE l.long_wait
          AND regexp_matches(a.name, '^(cuda|cu|hip)StreamWait(Event|Value\w*)(_v\d+)?$')
        GROUP BY ALL
    ) AS we USING (rank, g0, g1, at_window_end)
),
sync_all AS (
    SELECT rank, start_ns, end_ns, name FROM _tp_sync_api
),
host_idx AS (
    -- input ranges and synchronising calls in one start-sorted index, each kind with its own
    -- running max of ends (arg_max ignores the other kind's NULL ends): one ASOF join, not two
    SELECT rank, start_ns,
           max(input_end) OVER w AS input_run_end,
           arg_max(input_text, input_end) OVER w AS input_run_text,
           max(sync_end) OVER w AS sync_run_end,
           arg_max(sync_call, sync_end) OVER w AS sync_run_call
    FROM (
        SELECT rank, start_ns,
               max(input_end) AS input_end, arg_max(input_text, input_end) AS input_text,
               max(sync_end) AS sync_end, arg_max(sync_call, sync_end) AS sync_call
        FROM (
            SELECT rank, start_ns, end_ns AS input_end, text AS input_text,
                   NULL::BIGINT AS sync_end, NULL::STRUCT(name VARCHAR, start_ns BIGINT) AS sync_call
            FROM nvtx
            WHERE end_ns IS NOT NULL AND end_ns > start_ns AND text IS NOT NULL
              AND CASE WHEN getvariable('input_pattern') = (SELECT value FROM settings WHERE key = 'input_pattern')
                       THEN regexp_matches(text, getvariable('input_pattern'))
                       ELSE regexp_matches(text, (SELECT value FROM settings WHERE key = 'input_pattern')) END
            UNION ALL
            SELECT rank, start_ns, NULL, NULL, end_ns, {'name': name, 'start_ns': start_ns}
            FROM sync_all
        )
        GROUP BY rank, start_ns
    )
    WINDOW w AS (PARTITION BY rank ORDER BY start_ns ROWS UNBOUNDED PRECEDING)
),
sync_zero AS (
    SELECT rank, start_ns, {'name': min(name), 'start_ns': start_ns} AS call
    FROM sync_all WHERE end_ns = start_ns GROUP BY rank, start_ns
),
evidence AS (
    -- only gaps with a host stall (host_end) need the host's ranges; in launch-bound traces most
    -- gaps are dependencies (idle_other) and skip these joins
    SELECT c.*,
           CASE WHEN h.input_run_end > c.g0 THEN h.input_run_text END AS input_text,
           coalesce(CASE WHEN h.sync_run_end >= c.g0 THEN h.sync_run_call END, z.call) AS sync_call,
           CASE WHEN n.end_ns >= c.host_end THEN n.text END AS thread_text
    FROM (SELECT * FROM waited WHERE host_end IS NOT NULL) AS c
    ASOF LEFT JOIN host_idx AS h ON h.rank = c.rank AND c.host_end > h.start_ns
    LEFT JOIN sync_zero AS z ON z.rank = c.rank AND z.start_ns = c.host_end
    ASOF LEFT JOIN (SELECT rank, tid, start_ns, end_ns, text FROM nvtx WHERE end_ns IS NOT NULL) AS n
        ON n.rank = c.rank AND n.tid = c.a_tid AND c.host_end >= n.start_ns
    UNION ALL BY NAME
    SELECT *, NULL::VARCHAR AS input_text, NULL::STRUCT(name VARCHAR, start_ns BIGINT) AS sync_call,
           NULL::VARCHAR AS thread_text
    FROM waited
    WHERE host_end IS NULL
),
per_span AS (
    -- the cause of each distinct gap; a gap of the capture and of a step often is the same
    SELECT
        rank, g0, g1, at_window_end,
        CASE WHEN other_reason IS NULL THEN a_ns END AS a_ns,
        w_ns, wait_cause, wait_activity, wait_sync_start_ns,
        CASE WHEN other_reason IS NULL THEN 'host' ELSE 'idle_other' END AS kind,
        CASE
            WHEN host_end IS NULL THEN NULL
            WHEN input_text IS NOT NULL THEN 'input_stall'
            WHEN sync_call IS NOT NULL THEN 'sync_stall'
            ELSE 'host_bound'
        END AS host_cause,
        CASE
            WHEN host_end IS NULL THEN NULL
            WHEN input_text IS NOT NULL THEN input_text
            WHEN sync_call IS NOT NULL THEN sync_call.name
            ELSE thread_text
        END AS host_activity,
        CASE WHEN host_end IS NOT NULL AND input_text IS NULL THEN sync_call.start_ns END AS sync_start_ns,
        a_name AS launch_name,
        other_reason,
        correlation_id
    FROM evidence
)
SELECT s.rank, s.step, s.g0, s.g1, p.* EXCLUDE (rank, g0, g1, at_window_end)
FROM _tp_gap_spans AS s
JOIN per_span AS p USING (rank, g0, g1, at_window_end);
