-- The statements of the report's aligned timeline: its window and operations (nsight_analyze/report_doc/timeline.py).

-- name: rank_offsets
-- Each rank's clock offset (0 when unknown): its file time plus `off` is the aligned (job) time,
-- the shift the aligned_kernels / aligned_memops views apply. Joined in as $offsets below.
(SELECT rank, COALESCE(clock_offset_ns, 0) AS off FROM ranks)

-- name: offset_range
-- The smallest and largest clock offset over the ranks ($offsets: rank_offsets).
SELECT min(off), max(off) FROM $offsets

-- name: near_window
-- A condition on the rows' own (unaligned) times ($alias: the table's alias) keeping every row
-- that may overlap the aligned window: it ends after $after (the window's start less the largest
-- offset) and starts before $before (the window's end less the smallest offset).
AND $alias.end_ns > $after AND $alias.start_ns < $before

-- name: gpu_ops_aligned
-- Every GPU operation with aligned times and its category (gpu_ops + the rank's offset); copies
-- and memsets of category memory are the series `copies`. $near: a near_window on g, or nothing.
SELECT g.rank, g.stream_id, g.start_ns + o.off AS a0, g.end_ns + o.off AS a1, g.name,
       CASE WHEN g.category = 'memory' AND g.op <> 'kernel' THEN 'copies'
            ELSE g.category END AS category
FROM gpu_ops g JOIN $offsets o USING (rank)
WHERE true $near

-- name: aligned_ops_fallback
-- The same when gpu_ops is absent: the aligned views, categories as docs/metrics.md says.
SELECT rank, stream_id, aligned_start_ns AS a0, aligned_end_ns AS a1, name,
       CASE WHEN category IN ('compute','memory','comms') THEN category ELSE 'other' END
       AS category FROM aligned_kernels
UNION ALL
SELECT rank, stream_id, aligned_start_ns, aligned_end_ns,
       '[CUDA ' || CASE WHEN kind = 'memset' THEN 'memset' ELSE 'memcpy ' || kind END || ']',
       CASE WHEN kind = 'PtoP' THEN 'comms' ELSE 'copies' END FROM aligned_memops

-- name: idle_gaps_aligned
-- The whole-capture idle gaps with aligned times, as operations of their cause's category, named
-- by what the host was doing. $near: a near_window on g, or nothing.
SELECT g.rank, NULL::BIGINT AS stream_id, g.start_ns + o.off AS a0, g.end_ns + o.off AS a1,
       COALESCE(g.host_activity, '') AS name, g.cause AS category
FROM gaps g JOIN $offsets o USING (rank) WHERE g.step IS NULL $near

-- name: ops_and_gaps
-- The operations ($ops) and the idle gaps ($gaps) as one source.
$ops UNION ALL $gaps

-- name: step_spans
-- Per step number: the aligned span over all ranks' step windows ($steps: StepRange.sql on s.step).
SELECT s.step, min(s.start_ns + o.off) AS a0, max(s.end_ns + o.off) AS a1
FROM steps s JOIN $offsets o USING (rank) WHERE $steps GROUP BY s.step ORDER BY s.step

-- name: window_table
-- The operations of $source overlapping the widest window considered (? ?: its start and end),
-- into the TEMP table $table, read once per report.
CREATE OR REPLACE TEMP TABLE $table AS SELECT * FROM ($source) WHERE a1 > ? AND a0 < ?

-- name: source_span
-- The first start and last end of the operations of $source (no step windows: the whole capture).
SELECT min(a0), max(a1) FROM ($source)

-- name: window_op_count
-- How many operations of $source overlap the window (? ?: its start and end).
SELECT count(*) FROM ($source) WHERE a1 > ? AND a0 < ?

-- name: window_ops
-- The operations of $source overlapping the window (? ? ? ?: its start three times, its end), each
-- its own bar: times from the window's start, a count of 1 and its busy time.
SELECT rank, category, stream_id, a0 - ? AS s, a1 - ? AS e, name, 1::BIGINT AS n,
       (a1 - a0)::BIGINT AS busy
FROM ($source) WHERE a1 > ? AND a0 < ? ORDER BY rank, a0

-- name: window_series_count
-- How many (rank, category) series the operations of $source overlapping the window (? ?) form.
SELECT count(DISTINCT (rank, category)) FROM ($source) WHERE a1 > ? AND a0 < ?

-- name: window_op_buckets
-- The operations of $source overlapping the window merged per (rank, category, time bucket): span,
-- count, busy time, longest name (? ? ? ?: the window's start three times, its end; then its start
-- and the bucket width).
SELECT rank, category, NULL::BIGINT AS stream_id,
       min(a0) - ? AS s, max(a1) - ? AS e, arg_max(name, a1 - a0) AS name,
       count(*)::BIGINT AS n, sum(a1 - a0)::BIGINT AS busy
FROM ($source) WHERE a1 > ? AND a0 < ?
GROUP BY rank, category, (a0 - ?) // ? ORDER BY rank, s
