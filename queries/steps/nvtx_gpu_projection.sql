-- nvtx_gpu_projection: NVTX ranges projected onto the GPU work they launched (our own, in SQL).
-- Why: an NVTX range is CPU time; what it cost the GPU starts when its first kernel runs and
-- ends when its last one does. This is the question Nsight Systems' nvtx_gpu_proj_trace recipe
-- answers; queries/steps/nvtx_projection_compare.sql puts the recipe's numbers beside these.
-- Columns:
--   rank INTEGER, tid BIGINT (thread of the range), start_ns BIGINT ns, end_ns BIGINT ns (the CPU
--   range), text VARCHAR, domain VARCHAR, event_type VARCHAR (push_pop | start_end),
--   level INTEGER (push/pop nesting depth on its thread, 0 = outermost; NULL for start/end ranges),
--   projected_start_ns BIGINT ns (start of the earliest GPU operation launched in the range),
--   projected_end_ns BIGINT ns (end of the latest one), projected_duration_ns BIGINT ns
--   (projected_end_ns - projected_start_ns), num_gpu_ops BIGINT (kernels, memcpys and memsets
--   launched in the range)
-- Definition: a GPU operation (gpu_ops) is launched in a range when its launching call (cuda_api,
--   same rank and correlation_id) is on the range's thread and starts in [start_ns, end_ns).
--   Nested ranges each count the operations launched inside them (a parent includes its
--   children's). Ranges that launched nothing have no row; marks and ranges without an end are
--   not ranges. Vectorised: push/pop ranges on one thread nest (a stack), so each launch lies in
--   one innermost range and in that range's ancestors. One ASOF join of the launches with the
--   thread's stack (the innermost open range after each time point) finds the innermost range;
--   its operations are aggregated there and added to every ancestor (each range's ancestors come
--   from one ASOF join per level over the ranges, not over the launches), so the work is
--   proportional to launches + ranges x levels. Start/end ranges may overlap anyhow: when there
--   are any, launches are numbered in (rank, tid, launch time) order, each range finds its first
--   and last launch number with two ASOF joins, and one range join on the numbers gathers them.
-- columns: rank, tid, start_ns, end_ns, text, domain, event_type, level, projected_start_ns, projected_end_ns, projected_duration_ns, num_gpu_ops
-- stage: rank
-- result: stored
-- requires: nvtx, _op_launches
CREATE OR REPLACE VIEW nvtx_gpu_projection AS
WITH ranges AS (
    SELECT
        row_number() OVER (ORDER BY rank, tid, start_ns, end_ns DESC, text) AS rid,
        rank, tid, start_ns, end_ns, text, domain, event_type
    FROM nvtx
    WHERE event_type IN ('push_pop', 'start_end')
      AND start_ns IS NOT NULL AND end_ns IS NOT NULL AND end_ns >= start_ns
),
launches AS (
    SELECT rank, tid, launch_ns, start_ns, end_ns
    FROM _op_launches
    WHERE launched AND rank IN (SELECT DISTINCT rank FROM ranges)
),
events AS (  -- push/pop depth: +1 at a start, -1 at an end; ends sort before starts at one time,
             -- except the end of an empty range, which follows its own start
    SELECT rank, tid, start_ns AS t, 1 AS kind, -end_ns AS tie, rid, 1 AS delta
    FROM ranges WHERE event_type = 'push_pop'
    UNION ALL
    SELECT rank, tid, end_ns, CASE WHEN end_ns = start_ns THEN 2 ELSE 0 END, 0, rid, -1
    FROM ranges WHERE event_type = 'push_pop'
),
depth AS (
    SELECT rid, delta,
           sum(delta) OVER (PARTITION BY rank, tid ORDER BY t, kind, tie, rid ROWS UNBOUNDED PRECEDING) - 1
               AS level
    FROM events
),
nested AS MATERIALIZED (  -- non-empty push/pop ranges with their level (empty ones launch nothing)
    SELECT r.rid, r.rank, r.tid, r.start_ns, r.end_ns, d.level
    FROM ranges AS r JOIN depth AS d ON d.rid = r.rid AND d.delta = 1
    WHERE r.event_type = 'push_pop' AND r.end_ns > r.start_ns
),
levels AS (
    SELECT DISTINCT rank, tid, level FROM nested
),
ancestors AS MATERIALIZED (  -- each range with itself and every range it nests in (one per level)
    SELECT c.rid, a.rid AS ancestor, c.level - v.level AS up
    FROM nested AS c
    JOIN levels AS v ON v.rank = c.rank AND v.tid = c.tid AND v.level <= c.level
    ASOF JOIN nested AS a ON a.rank = c.rank AND a.tid = c.tid AND a.level = v.level AND c.start_ns >= a.start_ns
    WHERE c.start_ns < a.end_ns
),
stack AS (  -- the innermost open range after each time point of a thread (-1: none open)
    SELECT rank, tid, t,
           coalesce(arg_max(rid, level) FILTER (WHERE delta = 1), arg_min(parent, level) FILTER (WHERE delta = -1))
               AS top
    FROM (
        SELECT n.rank, n.tid, n.start_ns AS t, n.rid, n.level, 1 AS delta, NULL::BIGINT AS parent FROM nested AS n
        UNION ALL
        SELECT n.rank, n.tid, n.end_ns, n.rid, n.level, -1, coalesce(p.ancestor, -1)
        FROM nested AS n LEFT JOIN ancestors AS p ON p.rid = n.rid AND p.up = 1
    )
    GROUP BY rank, tid, t
),
innermost AS (  -- per innermost range: the operations launched directly in it
    SELECT s.top AS rid, min(l.start_ns) AS s, max(l.end_ns) AS e, count(*) AS n
    FROM launches AS l
    ASOF JOIN stack AS s ON s.rank = l.rank AND s.tid = l.tid AND l.launch_ns >= s.t
    WHERE s.top >= 0
    GROUP BY s.top
),
nested_proj AS (
    SELECT a.ancestor AS rid, min(i.s) AS projected_start_ns, max(i.e) AS projected_end_ns, sum(i.n) AS num_gpu_ops
    FROM innermost AS i JOIN ancestors AS a ON a.rid = i.rid
    GROUP BY a.ancestor
),
loose AS (
    SELECT * FROM ranges WHERE event_type <> 'push_pop'
),
numbered AS (  -- launches in (rank, tid, launch time) order, only when there are start/end ranges
    SELECT row_number() OVER (ORDER BY rank, tid, launch_ns, start_ns, end_ns) AS idx, *
    FROM launches
    WHERE EXISTS (SELECT 1 FROM loose)
),
launch_keys AS (  -- one row per launch time: ASOF needs unique keys (a graph launch has many ops)
    SELECT rank, tid, launch_ns, min(idx) AS lo, max(idx) AS hi
    FROM numbered
    GROUP BY rank, tid, launch_ns
),
firsts AS (
    SELECT r.rid, f.lo AS first_idx
    FROM loose AS r
    ASOF JOIN launch_keys AS f ON f.rank = r.rank AND f.tid = r.tid AND f.launch_ns >= r.start_ns
),
lasts AS (
    SELECT r.rid, l.hi AS last_idx
    FROM loose AS r
    ASOF JOIN launch_keys AS l ON l.rank = r.rank AND l.tid = r.tid AND l.launch_ns < r.end_ns
),
spans AS (
    SELECT f.rid, f.first_idx, l.last_idx
    FROM firsts AS f JOIN lasts AS l USING (rid)
    WHERE l.last_idx >= f.first_idx
),
loose_proj AS (
    SELECT s.rid, min(o.start_ns) AS projected_start_ns, max(o.end_ns) AS projected_end_ns,
           count(*) AS num_gpu_ops
    FROM spans AS s
    JOIN numbered AS o ON o.idx >= s.first_idx AND o.idx <= s.last_idx
    GROUP BY s.rid
),
projected AS (
    SELECT * FROM nested_proj UNION ALL SELECT * FROM loose_proj
)
SELECT
    r.rank, r.tid, r.start_ns, r.end_ns, r.text, r.domain, r.event_type,
    CAST(d.level AS INTEGER) AS level,
    p.projected_start_ns, p.projected_end_ns,
    p.projected_end_ns - p.projected_start_ns AS projected_duration_ns,
    p.num_gpu_ops::BIGINT AS num_gpu_ops
FROM projected AS p
JOIN ranges AS r USING (rid)
LEFT JOIN depth AS d ON d.rid = p.rid AND d.delta = 1;
