-- _whatif_inputs: what the what-if replay reads, one row per job, scenario, event and rank of the job.
-- Why: the replay's recurrence is sequential (a collective ends when its last participant arrives,
--   and each rank's next arrival depends on that end); everything it reads is computed here, in SQL,
--   and nsight_analyze/replay.py runs only the recurrence over these rows (docs/whatif.md, "Replay").
-- Columns: job INTEGER, scenario VARCHAR (actual, then whatif's scenarios), ev BIGINT (the job's
--   events in replay order: its collectives, then each step's end), rank BIGINT, step BIGINT,
--   is_end BOOLEAN (the event is the step's end), part BOOLEAN (the rank takes part in the
--   collective), waits BOOLEAN (its work waited for the collective's end), off BIGINT ns (its point
--   after its anchor), fifo BIGINT ns (the queue gap behind its previous collective), x BIGINT ns (the
--   transfer after the last arrival), post BIGINT ns (step end: the work after its last collective),
--   w0 BIGINT ns (the rank's start of the first step, aligned clock), actual_ns BIGINT ns (step end:
--   the step's measured time, the longest window over the ranks), fixed BOOLEAN (the rank is one
--   slowest-rank-at-median replaces).
-- Definition: whatif.sql's, up to the recurrence: the steps, collectives and points it names; off,
--   fifo, x and post are rounded to whole ns, NULL where the rank has no such value (the replay takes
--   NULL as "none": a point out of reach, a queue gap or transfer of 0).
-- columns: job, scenario, ev, rank, step, is_end, part, waits, off, fifo, x, post, w0, actual_ns, fixed
-- stage: job
-- result: step
-- requires: _whatif_dep_ord, _whatif_step_ends, gaps, jobs, merge_coll_members, merge_rank_clock, rank_attribution, rank_coll_ready, settings, steps
CREATE OR REPLACE VIEW _whatif_inputs AS
WITH wi_rk AS (  -- the ranks of complete jobs: a collective ends when its last participant arrives,
                -- so the replay of a partial job (2 of 128 ranks) would invent the absent ranks' times
    SELECT rank, job, clock_offset_ns AS off FROM merge_rank_clock
    WHERE job IN (SELECT job FROM jobs WHERE complete)
),
wi_win AS (
    SELECT rk.job, s.rank, s.step, s.start_ns AS w0, s.end_ns AS w1, rk.off
    FROM steps AS s JOIN wi_rk AS rk USING (rank)
    WHERE s.step IS NOT NULL
),
wi_full AS (  -- steps every rank of the job has: the replay couples all of them
    SELECT w.job, w.step
    FROM wi_win AS w JOIN (SELECT job, count(*) AS n FROM wi_rk GROUP BY job) AS nr USING (job)
    GROUP BY w.job, w.step, nr.n
    HAVING count(*) = nr.n
),
wi_w AS MATERIALIZED (
    SELECT w.* FROM wi_win AS w SEMI JOIN wi_full AS f ON f.job = w.job AND f.step = w.step
),
wi_cs AS MATERIALIZED (  -- each participant of a complete collective, in its step (file time)
    SELECT w.job, m.rank, m.coll_id, w.step, w.w0, m.arrive_ns AS aligned_arrive,
           m.arrive_ns - w.off AS a, m.aligned_end_ns - w.off AS e,
           m.aligned_end_ns - m.last_arrive_ns AS x, m.correlation_id
    FROM merge_coll_members AS m
    -- ASOF: a rank's windows are disjoint, so the one that holds an arrival is the last one that
    -- starts at or before it (a hash join on the rank alone pairs every member with every window)
    ASOF JOIN (SELECT *, w0 + off AS aligned_w0 FROM wi_w WHERE w1 > w0) AS w
        ON w.rank = m.rank AND m.arrive_ns >= w.aligned_w0
    WHERE m.arrive_ns - w.off < w.w1
),
wi_coll AS (
    SELECT job, coll_id, min(step) AS step, median(aligned_arrive) AS ord
    FROM wi_cs GROUP BY job, coll_id
    HAVING count(DISTINCT step) = 1
),
wi_budget AS (  -- the first steps whose events fit settings.whatif_max_events (the replay is sequential)
    SELECT job, step
    FROM (
        SELECT job, step,
               sum(n) OVER (PARTITION BY job ORDER BY step ROWS UNBOUNDED PRECEDING) - n AS before
        FROM (
            SELECT f.job, f.step, 1 + count(c.coll_id) AS n
            FROM wi_full AS f LEFT JOIN wi_coll AS c ON c.job = f.job AND c.step = f.step
            GROUP BY f.job, f.step
        )
    )
    WHERE before < coalesce((SELECT TRY_CAST(value AS BIGINT) FROM settings WHERE key = 'whatif_max_events'), 2000)
),
wi_ev AS MATERIALIZED (  -- the job's events: its collectives, then each step's end
    SELECT job, step, coll_id, is_end,
           row_number() OVER (PARTITION BY job ORDER BY step, is_end, ord, coll_id) AS ev
    FROM (
        SELECT job, step, coll_id, ord, FALSE AS is_end FROM wi_coll
        UNION ALL
        SELECT job, step, NULL, NULL, TRUE FROM wi_full
    ) AS x
    SEMI JOIN wi_budget AS b ON b.job = x.job AND b.step = x.step
),
wi_pc AS (
    SELECT c.*, e.ev,
           lag(c.e) OVER (PARTITION BY c.rank, c.step ORDER BY e.ev) AS prev_e,
           r.ready_ns, coalesce(r.waits, FALSE) AS waits
    FROM wi_cs AS c
    JOIN wi_ev AS e ON e.job = c.job AND e.coll_id = c.coll_id
    LEFT JOIN rank_coll_ready AS r ON r.rank = c.rank AND r.correlation_id = c.correlation_id AND r.start_ns = c.a
),
wi_blocked AS (
    SELECT *, prev_e IS NOT NULL AND a - prev_e <= 5000 AS blocked FROM wi_pc
),
wi_dep AS (  -- a participant that did not queue started when its work was done: that work's position
    SELECT b.coll_id, round(median(d.rev_ord))::BIGINT AS rev_ord
    FROM wi_blocked AS b
    JOIN _whatif_dep_ord AS d ON d.rank = b.rank AND d.start_ns = b.a AND d.step = b.step
    WHERE NOT b.blocked
    GROUP BY b.coll_id
),
wi_pc2 AS (  -- a queued participant was ready when its own work at that position ended
    SELECT b.*, e.ends[d.rev_ord] AS dep_ready
    FROM wi_blocked AS b
    LEFT JOIN wi_dep AS d ON d.coll_id = b.coll_id
    LEFT JOIN _whatif_step_ends AS e ON e.rank = b.rank AND e.step = b.step
),
wi_coll_pts AS (
    SELECT job, rank, step, ev, w0, e, ready_ns, waits,
           coalesce(max(CASE WHEN waits THEN e END) OVER (
               PARTITION BY rank, step ORDER BY ev ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), w0) AS anchor,
           CASE WHEN blocked THEN least(a, greatest(coalesce(dep_ready, ready_ns, w0), w0)) ELSE a END AS ready,
           CASE WHEN blocked THEN a - prev_e END AS fifo,
           x
    FROM wi_pc2
),
wi_last AS (  -- per rank and step: its last collective
    SELECT job, rank, step, arg_max(e, ev) AS e_k, arg_max(greatest(coalesce(ready_ns, w0), w0), ev) AS cend,
           coalesce(max(CASE WHEN waits THEN e END), max(w0)) AS anchor
    FROM wi_coll_pts GROUP BY job, rank, step
),
wi_end_pts AS (
    SELECT w.job, w.rank, w.step, e.ev, w.w0, w.w1,
           coalesce(l.cend, w.w1) AS cend,
           coalesce(l.anchor, w.w0) AS anchor,
           coalesce(greatest(l.e_k, l.cend), w.w1) AS pstart
    FROM wi_w AS w
    JOIN wi_ev AS e ON e.job = w.job AND e.step = w.step AND e.is_end
    LEFT JOIN wi_last AS l ON l.job = w.job AND l.rank = w.rank AND l.step = w.step
),
wi_pts AS (  -- the time points whose offsets the no-* scenarios shorten
    SELECT rank, step, ev, 'ready' AS kind, ready AS t FROM wi_coll_pts
    UNION ALL SELECT rank, step, ev, 'anchor', anchor FROM wi_coll_pts
    UNION ALL SELECT rank, step, ev, 'anchor', anchor FROM wi_end_pts
    UNION ALL SELECT rank, step, ev, 'cend', cend FROM wi_end_pts
    UNION ALL SELECT rank, step, ev, 'w1', w1 FROM wi_end_pts
    UNION ALL SELECT rank, step, ev, 'pstart', pstart FROM wi_end_pts
),
wi_rem AS (
    SELECT p.rank, p.ev, p.kind,
           coalesce(sum(greatest(0, least(g.end_ns, p.t) - g.start_ns)) FILTER (WHERE g.cause = 'input_stall'), 0)
               AS r_input,
           coalesce(sum(greatest(0, least(g.end_ns, p.t) - g.start_ns))
                    FILTER (WHERE g.cause IN ('launch_gap', 'host_bound')), 0) AS r_launch,
           coalesce(sum(greatest(0, least(g.end_ns, p.t) - g.start_ns)) FILTER (WHERE g.cause = 'sync_stall'), 0)
               AS r_sync
    FROM wi_pts AS p
    LEFT JOIN gaps AS g ON g.rank = p.rank AND g.step = p.step AND g.start_ns < p.t
        AND g.cause IN ('input_stall', 'launch_gap', 'host_bound', 'sync_stall')
    GROUP BY p.rank, p.ev, p.kind
),
wi_base AS MATERIALIZED (  -- every rank at every event: offset, queue gap, transfer, post
    SELECT r.job, r.rank, e.ev, e.step, e.is_end, c.ev IS NOT NULL AS part,
           CASE WHEN e.is_end THEN p.cend - p.anchor ELSE c.ready - c.anchor END AS off,
           coalesce(c.waits, FALSE) AS waits, c.fifo, c.x,
           CASE WHEN e.is_end THEN p.w1 - p.pstart END AS post
    FROM wi_rk AS r
    JOIN wi_ev AS e ON e.job = r.job
    LEFT JOIN wi_coll_pts AS c ON c.rank = r.rank AND c.ev = e.ev
    LEFT JOIN wi_end_pts AS p ON p.rank = r.rank AND p.ev = e.ev
),
wi_fixed AS (  -- the ranks slowest-rank-at-median replaces
    SELECT job, rank FROM rank_attribution WHERE step IS NULL AND cause IS NOT NULL
    UNION ALL
    SELECT job, arg_max(rank, (excess_ns, -rank)) FROM rank_attribution  -- ties: the lowest rank
    WHERE step IS NULL AND job NOT IN (SELECT job FROM rank_attribution WHERE step IS NULL AND cause IS NOT NULL)
    GROUP BY job
),
wi_med AS (  -- the median rank among those not replaced (all ranks when every one is)
    SELECT b.job, b.ev,
           coalesce(median(b.off) FILTER (WHERE (b.part OR b.is_end) AND f.rank IS NULL),
                    median(b.off) FILTER (WHERE b.part OR b.is_end)) AS off,
           coalesce(median(b.fifo) FILTER (WHERE f.rank IS NULL), median(b.fifo)) AS fifo,
           coalesce(median(b.x) FILTER (WHERE f.rank IS NULL), median(b.x)) AS x,
           coalesce(median(b.post) FILTER (WHERE f.rank IS NULL), median(b.post)) AS post
    FROM wi_base AS b LEFT JOIN wi_fixed AS f ON f.job = b.job AND f.rank = b.rank
    GROUP BY b.job, b.ev
),
wi_inp AS MATERIALIZED (
    SELECT b.job, sc.scenario, b.rank, b.ev, b.step, b.is_end, b.part, b.waits,
           CASE
               WHEN sc.scenario = 'slowest-rank-at-median' AND f.rank IS NOT NULL THEN m.off
               WHEN sc.scenario LIKE 'no-%' THEN b.off - CASE sc.scenario
                   WHEN 'no-input-stalls' THEN rp.r_input - ra.r_input
                   WHEN 'no-launch-gaps' THEN rp.r_launch - ra.r_launch
                   ELSE rp.r_sync - ra.r_sync END
               ELSE b.off
           END AS off,
           CASE
               WHEN sc.scenario = 'comms-hidden' THEN 0
               WHEN sc.scenario = 'slowest-rank-at-median' AND f.rank IS NOT NULL THEN m.fifo
               ELSE b.fifo
           END AS fifo,
           CASE
               WHEN sc.scenario = 'comms-hidden' THEN 0
               WHEN sc.scenario = 'slowest-rank-at-median' AND f.rank IS NOT NULL THEN m.x
               ELSE b.x
           END AS x,
           CASE
               WHEN sc.scenario = 'slowest-rank-at-median' AND f.rank IS NOT NULL THEN m.post
               WHEN sc.scenario LIKE 'no-%' THEN b.post - CASE sc.scenario
                   WHEN 'no-input-stalls' THEN rw.r_input - rs.r_input
                   WHEN 'no-launch-gaps' THEN rw.r_launch - rs.r_launch
                   ELSE rw.r_sync - rs.r_sync END
               ELSE b.post
           END AS post
    FROM wi_base AS b
    CROSS JOIN (
        SELECT unnest(['actual', 'slowest-rank-at-median', 'comms-hidden', 'no-input-stalls',
                       'no-launch-gaps', 'no-sync-stalls']) AS scenario
    ) AS sc
    JOIN wi_med AS m ON m.job = b.job AND m.ev = b.ev
    LEFT JOIN wi_fixed AS f ON f.job = b.job AND f.rank = b.rank
    LEFT JOIN wi_rem AS rp ON rp.rank = b.rank AND rp.ev = b.ev AND rp.kind = CASE WHEN b.is_end THEN 'cend' ELSE 'ready' END
    LEFT JOIN wi_rem AS ra ON ra.rank = b.rank AND ra.ev = b.ev AND ra.kind = 'anchor'
    LEFT JOIN wi_rem AS rw ON rw.rank = b.rank AND rw.ev = b.ev AND rw.kind = 'w1'
    LEFT JOIN wi_rem AS rs ON rs.rank = b.rank AND rs.ev = b.ev AND rs.kind = 'pstart'
),
wi_start AS (
    SELECT w.job, w.rank, w.w0 + w.off AS w0
    FROM wi_w AS w JOIN (SELECT job, min(step) AS s FROM wi_full GROUP BY job) AS f
        ON f.job = w.job AND f.s = w.step
)
,
wi_actual AS (
    SELECT job, step, max(w1 - w0) AS actual_ns FROM wi_w GROUP BY job, step
)
SELECT i.job::INTEGER AS job, i.scenario, i.ev::BIGINT AS ev, i.rank::BIGINT AS rank, i.step::BIGINT AS step,
       i.is_end, i.part, i.waits, round(i.off)::BIGINT AS off, round(i.fifo)::BIGINT AS fifo,
       round(i.x)::BIGINT AS x, round(i.post)::BIGINT AS post, s.w0::BIGINT AS w0,
       CASE WHEN i.is_end THEN a.actual_ns END::BIGINT AS actual_ns,
       f.rank IS NOT NULL AS fixed
FROM wi_inp AS i
LEFT JOIN wi_start AS s ON s.job = i.job AND s.rank = i.rank
LEFT JOIN wi_actual AS a ON a.job = i.job AND a.step = i.step
LEFT JOIN wi_fixed AS f ON f.job = i.job AND f.rank = i.rank;
