-- The statements of the Chrome-trace export (nsight_analyze/export/chrome_trace.py).

-- name: far_clock
-- Whether any aligned time reaches ? ns (DOUBLE_EXACT_NS): an epoch-based clock, whose µs do not
-- fit a double exactly.
SELECT coalesce(max(greatest(abs(aligned_start_ns), abs(aligned_end_ns))), 0) >= ?
FROM (SELECT aligned_start_ns, aligned_end_ns FROM aligned_kernels
      UNION ALL SELECT aligned_start_ns, aligned_end_ns FROM aligned_memops)

-- name: us_exact_macro
-- Integer ns as exact µs with 3 decimals, for any clock: DECIMAL(38, 3) keeps every digit, at
-- some cost. The event statements call _export_us.
CREATE OR REPLACE TEMP MACRO _export_us(ns) AS ((ns)::DECIMAL(38, 0) * 0.001::DECIMAL(4, 3))

-- name: us_double_macro
-- The same for |aligned ns| below DOUBLE_EXACT_NS: ns / 1000 as a double prints exactly
-- (<= 15 significant digits).
CREATE OR REPLACE TEMP MACRO _export_us(ns) AS ((ns) / 1000)

-- name: export_ranks
-- Each exported rank ($ranks: their numbers, or NULL when none) and its clock offset.
CREATE OR REPLACE TEMP TABLE _export_ranks AS
SELECT r.rank, coalesce(k.clock_offset_ns, 0)::BIGINT AS off
FROM (SELECT unnest([$ranks]) AS rank) AS r LEFT JOIN ranks AS k ON k.rank = r.rank
WHERE r.rank IS NOT NULL

-- name: whole_windows
-- Without --steps: every exported rank's whole capture (no bounds).
CREATE OR REPLACE TEMP TABLE _export_windows AS
SELECT rank, off, NULL::BIGINT AS lo, NULL::BIGINT AS hi FROM _export_ranks

-- name: step_windows
-- With --steps: the aligned span of each exported rank's steps $first..$last (NULL: open);
-- ranks without such a step are left out.
CREATE OR REPLACE TEMP TABLE _export_windows AS
SELECT e.rank, e.off, min(s.start_ns) + e.off AS lo, max(s.end_ns) + e.off AS hi
FROM _export_ranks AS e JOIN steps AS s ON s.rank = e.rank
WHERE s.step IS NOT NULL AND ($first IS NULL OR s.step >= $first) AND ($last IS NULL OR s.step <= $last)
GROUP BY e.rank, e.off

-- name: window_count
SELECT count(*) FROM _export_windows

-- name: steps_of_exported_ranks
-- The steps the exported ranks have (the error message when --steps selects none).
SELECT min(step), max(step) FROM steps WHERE step IS NOT NULL AND rank IN
(SELECT rank FROM _export_ranks)

-- name: kernel_events
-- Kernels, on their stream's track, coloured by category ($cname_*: CNAME). Key order matters to
-- the Kineto reader's probe: it finds the GPU's pid in the text `"cat": "kernel", "name": ...,
-- "pid": N`, so cat, name and pid come first, in that order. `json_merge_patch('{}', args)`
-- drops the args whose value is NULL (RFC 7386).
SELECT json_object(
    'ph', 'X', 'cat', 'kernel', 'name', coalesce(k.name, '?'), 'pid', k.rank,
    'tid', coalesce(k.stream_id, 0), 'ts', _export_us(k.aligned_start_ns),
    'dur', _export_us(greatest(k.duration_ns, 0)),
    'cname', CASE k.category WHEN 'compute' THEN '$cname_compute' WHEN 'memory' THEN '$cname_memory'
                             WHEN 'copies' THEN '$cname_copies' WHEN 'comms' THEN '$cname_comms'
                             ELSE 'grey' END,
    'args', json_merge_patch('{}', json_object(
        'category', coalesce(k.category, 'other'), 'subcategory', k.subcategory,
        'correlation', k.correlation_id, 'device', k.device_id, 'stream', k.stream_id,
        'grid', CASE WHEN k.grid_x IS NOT NULL THEN [k.grid_x, k.grid_y, k.grid_z] END,
        'block', CASE WHEN k.block_x IS NOT NULL THEN [k.block_x, k.block_y, k.block_z] END,
        'registers per thread', k.registers_per_thread,
        'shared memory',
            CASE WHEN k.static_smem_bytes IS NOT NULL OR k.dynamic_smem_bytes IS NOT NULL
                 THEN coalesce(k.static_smem_bytes, 0) + coalesce(k.dynamic_smem_bytes, 0) END,
        'graph id', k.graph_id, 'graph node id', k.graph_node_id,
        'recorded duration ns', CASE WHEN k.duration_ns < 0 THEN k.duration_ns END))
)::VARCHAR
FROM aligned_kernels AS k JOIN _export_windows AS w ON w.rank = k.rank
WHERE (w.lo IS NULL OR k.aligned_start_ns >= w.lo) AND (w.hi IS NULL OR k.aligned_start_ns < w.hi)

-- name: memop_events
-- Memory copies and sets, named as Kineto names them ("Memcpy HtoD (Pinned -> Device)") so the
-- reader recovers kind and memory kinds, in the copies colour ($cname_copies).
SELECT json_object(
    'ph', 'X', 'cat', CASE WHEN m.kind = 'memset' THEN 'gpu_memset' ELSE 'gpu_memcpy' END,
    'name', CASE WHEN m.kind = 'memset' THEN 'Memset (' || coalesce(m.dst_kind, 'Unknown') || ')'
                 ELSE 'Memcpy ' || coalesce(m.kind, 'Unknown') || ' ('
                      || coalesce(m.src_kind, 'Unknown') || ' -> ' || coalesce(m.dst_kind, 'Unknown')
                      || ')' END,
    'pid', m.rank, 'tid', coalesce(m.stream_id, 0),
    'ts', _export_us(m.aligned_start_ns), 'dur', _export_us(greatest(m.duration_ns, 0)),
    'cname', '$cname_copies',
    'args', json_merge_patch('{}', json_object(
        'category', 'copies', 'kind', m.kind, 'bytes', m.bytes, 'correlation', m.correlation_id,
        'device', m.device_id, 'stream', m.stream_id, 'graph node id', m.graph_node_id,
        'recorded duration ns', CASE WHEN m.duration_ns < 0 THEN m.duration_ns END))
)::VARCHAR
FROM aligned_memops AS m JOIN _export_windows AS w ON w.rank = m.rank
WHERE (w.lo IS NULL OR m.aligned_start_ns >= w.lo) AND (w.hi IS NULL OR m.aligned_start_ns < w.hi)

-- name: idle_events
-- The stored gaps of the whole-capture window, on the rank's idle track ($idle_tid), named and
-- coloured ($cname_*: IDLE_CNAME) by their cause.
SELECT json_object(
    'ph', 'X', 'cat', 'idle', 'name', coalesce(g.cause, 'idle'), 'pid', g.rank, 'tid', $idle_tid,
    'ts', _export_us(g.start_ns + w.off), 'dur', _export_us(g.duration_ns),
    'cname', CASE g.cause WHEN 'input_stall' THEN '$cname_input_stall' WHEN 'sync_stall' THEN '$cname_sync_stall'
                          WHEN 'launch_gap' THEN '$cname_launch_gap' WHEN 'host_bound' THEN '$cname_host_bound'
                          WHEN 'idle_other' THEN '$cname_idle_other' ELSE 'grey' END,
    'args', json_merge_patch('{}', json_object(
        'cause', g.cause, 'host activity', g.host_activity,
        'gap ts', _export_us(g.gap_start_ns + w.off), 'gap dur', _export_us(g.gap_end_ns - g.gap_start_ns),
        'ended by correlation', g.correlation_id))
)::VARCHAR
FROM gaps AS g JOIN _export_windows AS w ON w.rank = g.rank
WHERE g.step IS NULL
  AND (w.lo IS NULL OR g.start_ns + w.off >= w.lo) AND (w.hi IS NULL OR g.start_ns + w.off < w.hi)
-- in time order: `gaps` is stored in the order the analysis' threads wrote it, which differs
-- between two ingests of the same trace
ORDER BY g.rank, g.start_ns, g.duration_ns, g.cause

-- name: step_events
-- The stored steps windows on the rank's steps track ($steps_tid, colour $cname_step): all of them
-- ($all_steps TRUE), or with --steps the steps $first..$last (NULL: open).
SELECT json_object(
    'ph', 'X', 'cat', 'step',
    'name', CASE WHEN s.step IS NULL THEN 'capture' ELSE 'step ' || s.step END,
    'pid', s.rank, 'tid', $steps_tid,
    'ts', _export_us(s.start_ns + w.off), 'dur', _export_us(greatest(s.end_ns - s.start_ns, 0)),
    'cname', '$cname_step',
    'args', json_merge_patch('{}', json_object('step', s.step, 'source', s.source))
)::VARCHAR
FROM steps AS s JOIN _export_windows AS w ON w.rank = s.rank
WHERE $all_steps
   OR (s.step IS NOT NULL AND ($first IS NULL OR s.step >= $first) AND ($last IS NULL OR s.step <= $last))

-- name: collective_flows
-- Members of each instance whose kernel is exported, chained in arrival order; instances
-- seen on one rank only (unmatched, or cut by --ranks) get no flow.
WITH m AS (
    SELECT m.coll_id, m.op, m.rank, coalesce(m.stream_id, 0) AS tid, m.correlation_id,
           m.arrive_ns, m.complete, (m.arrive_ns + m.aligned_end_ns) // 2 AS mid_ns
    FROM merge_coll_members AS m JOIN _export_windows AS w ON w.rank = m.rank
    WHERE m.coll_id IS NOT NULL
      AND (w.lo IS NULL OR m.arrive_ns >= w.lo) AND (w.hi IS NULL OR m.arrive_ns < w.hi)
),
multi AS (SELECT coll_id FROM m GROUP BY coll_id HAVING count(DISTINCT rank) > 1),
chain AS (
    SELECT m.*,
           lead(m.rank) OVER o AS to_rank, lead(m.tid) OVER o AS to_tid,
           lead(m.mid_ns) OVER o AS to_mid_ns
    FROM m JOIN multi USING (coll_id)
    WINDOW o AS (PARTITION BY m.coll_id ORDER BY m.arrive_ns, m.rank, m.correlation_id)
),
pairs AS (
    SELECT *, row_number() OVER (ORDER BY coll_id, arrive_ns, rank, correlation_id) AS flow_id
    FROM chain WHERE to_rank IS NOT NULL
)
SELECT e FROM pairs, LATERAL (VALUES
    (json_object('ph', 's', 'cat', 'collective', 'name', coalesce(op, 'collective'), 'pid', rank,
                 'tid', tid, 'ts', _export_us(mid_ns), 'id', flow_id,
                 'args', json_object('coll_id', coll_id, 'complete', complete))::VARCHAR),
    (json_object('ph', 'f', 'bp', 'e', 'cat', 'collective', 'name', coalesce(op, 'collective'),
                 'pid', to_rank, 'tid', to_tid, 'ts', _export_us(to_mid_ns), 'id', flow_id,
                 'args', json_object('coll_id', coll_id, 'complete', complete))::VARCHAR)
) AS v(e)

-- name: metadata_events
-- Process and thread names (and sort order) for every exported rank and the tracks it has: its
-- streams, the steps track ($steps_tid) and the idle track ($idle_tid).
WITH procs AS (
    SELECT e.rank,
           'rank ' || e.rank || ' · ' || coalesce(r.hostname, '?') || ' · '
           || coalesce(r.gpu_name, 'GPU') || coalesce(' (device ' || r.device_id || ')', '') AS label
    FROM _export_ranks AS e LEFT JOIN ranks AS r ON r.rank = e.rank
),
tracks AS (
    SELECT DISTINCT k.rank, coalesce(k.stream_id, 0) AS tid, 'stream ' || coalesce(k.stream_id, 0) AS name
    FROM aligned_kernels AS k JOIN _export_windows AS w ON w.rank = k.rank
    WHERE (w.lo IS NULL OR k.aligned_start_ns >= w.lo) AND (w.hi IS NULL OR k.aligned_start_ns < w.hi)
    UNION
    SELECT DISTINCT m.rank, coalesce(m.stream_id, 0), 'stream ' || coalesce(m.stream_id, 0)
    FROM aligned_memops AS m JOIN _export_windows AS w ON w.rank = m.rank
    WHERE (w.lo IS NULL OR m.aligned_start_ns >= w.lo) AND (w.hi IS NULL OR m.aligned_start_ns < w.hi)
    UNION
    SELECT rank, $steps_tid, 'steps' FROM _export_windows WHERE rank IN (SELECT rank FROM steps)
    UNION
    SELECT rank, $idle_tid, 'idle' FROM _export_windows
    WHERE rank IN (SELECT rank FROM gaps WHERE step IS NULL)
)
SELECT e FROM (
    SELECT 0 AS part, rank, 0 AS tid, json_object('ph', 'M', 'name', 'process_name', 'pid', rank,
           'tid', 0, 'args', json_object('name', label))::VARCHAR AS e FROM procs
    UNION ALL
    SELECT 1, rank, 0, json_object('ph', 'M', 'name', 'process_sort_index', 'pid', rank, 'tid', 0,
           'args', json_object('sort_index', rank))::VARCHAR FROM procs
    UNION ALL
    SELECT 2, rank, tid, json_object('ph', 'M', 'name', 'thread_name', 'pid', rank, 'tid', tid,
           'args', json_object('name', name))::VARCHAR FROM tracks
    UNION ALL
    SELECT 3, rank, tid, json_object('ph', 'M', 'name', 'thread_sort_index', 'pid', rank, 'tid', tid,
           'args', json_object('sort_index', CASE tid WHEN $steps_tid THEN -2 WHEN $idle_tid THEN -1
                                                 ELSE least(tid, 1000000000) END))::VARCHAR
    FROM tracks
) ORDER BY rank, part, tid

-- name: first_rank_device
-- The first exported rank's world size, device, wall clock of aligned time 0 and GPU (the
-- Kineto reader's distributedInfo and deviceProperties).
SELECT r.world_size, r.device_id, r.session_start_utc_ns - coalesce(r.clock_offset_ns, 0),
       g.name, g.sm_count, g.memory_bytes, g.compute_major, g.compute_minor
FROM ranks AS r LEFT JOIN gpus AS g
  ON g.rank = r.rank AND g.device_id IS NOT DISTINCT FROM r.device_id
WHERE r.rank = ? LIMIT 1

-- name: rank_count
SELECT count(*) FROM ranks

-- name: drop_export_windows
DROP TABLE IF EXISTS temp.main._export_windows

-- name: drop_export_ranks
DROP TABLE IF EXISTS temp.main._export_ranks

-- name: drop_us_macro
DROP MACRO IF EXISTS temp.main._export_us
