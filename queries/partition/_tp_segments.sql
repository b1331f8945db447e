-- _tp_segments: the GPU timeline of each rank cut into elementary segments, with how many
-- operations of each category run in each and the step window that holds it.
-- Why: one sweep (one sort of the operation boundaries) yields every union the time partition
-- needs (C, C∪M, C∪M∪O, all, N) at once; step boundaries are cut points too, so each segment lies
-- in exactly one step window, and the partition of every window is a plain GROUP BY.
-- Columns: rank INTEGER, step BIGINT (the step window holding the segment; NULL outside every
--   step window or when the rank has no steps), start_ns, end_ns BIGINT ns (positive length),
--   c, m, o, n INTEGER (number of compute / memory / other / comms operations covering it),
--   step_end_ns BIGINT ns (end of that step window),
--   k INTEGER (how many of the m memory operations are copies: memcpy / memset operations; the
--   rest are memory-bound kernels).
-- Definition: events are the starts (+1) and ends (-1) of the rank's GPU operations per category
--   (zero-length operations are events with delta 0: they cover nothing but bound the capture
--   window), plus the step-window boundaries (delta 0); counts are running sums in time order; a
--   segment runs from one distinct event time to the next; copies (gpu_ops.op memcpy / memset of
--   category memory) count in m and in k. Segments tile the whole-capture window
--   [min start, max end) exactly. A segment is in the step window that started last before it,
--   if that window ends after the segment starts. (Exact below 32768 overlapping operations of
--   one category, or copies, on one rank, and below 52 days from a rank's first step start.)
-- stage: rank
-- result: step
-- requires: gpu_ops, steps
CREATE OR REPLACE VIEW _tp_segments AS
WITH ev AS (
    -- One running sum carries everything: five counters, 15 bits each (compute, memory, other,
    -- comms, and the copies among the memory operations; exact below 32768 overlapping operations
    -- of one category on a rank), and above bit 75 the end of the current step window, relative
    -- to the rank's first step start (each window start adds its end minus the previous window's
    -- end; relative, so that it stays below 2^52 ns (52 days) and the sum inside a HUGEINT). A
    -- running sum is the expensive part of the sweep; one, not six.
    SELECT rank,
           unnest([start_ns, end_ns]) AS ts,
           (unnest([1, -1]) * (CASE WHEN end_ns > start_ns THEN 1 ELSE 0 END)
               * (CASE category WHEN 'compute' THEN 1 WHEN 'memory' THEN 32768
                                WHEN 'other' THEN 1073741824 WHEN 'comms' THEN 35184372088832
                                ELSE 0 END
                  + CASE WHEN category = 'memory' AND op <> 'kernel' THEN 1152921504606846976 ELSE 0 END)
           )::HUGEINT AS dp
    FROM gpu_ops
    WHERE start_ns IS NOT NULL AND end_ns IS NOT NULL
    UNION ALL
    SELECT rank, unnest([start_ns, end_ns]) AS ts,
           unnest([(end_ns - coalesce(prev_end, base))::HUGEINT * 37778931862957161709568::HUGEINT, 0::HUGEINT])
    FROM (
        SELECT rank, start_ns, end_ns, lag(end_ns) OVER (PARTITION BY rank ORDER BY start_ns) AS prev_end,
               min(start_ns) OVER (PARTITION BY rank) AS base
        FROM steps
        WHERE step IS NOT NULL
    )
    UNION ALL
    -- after the rank's last event the running sum returns to 0 (the sweep runs over all ranks)
    SELECT rank, 9223372036854775807 AS ts,
           -(arg_max(end_ns, start_ns) - min(start_ns))::HUGEINT * 37778931862957161709568::HUGEINT
    FROM steps
    WHERE step IS NOT NULL
    GROUP BY rank
),
base AS (
    SELECT rank, min(start_ns) AS base FROM steps WHERE step IS NOT NULL GROUP BY rank
),
run AS (
    -- No GROUP BY ts: events at the same time get zero-length segments, except the first of them,
    -- whose running sum excludes all of them. Each event closes the segment that the event before
    -- it opened, so the pass needs only what came before: one sort (ORDER BY) and a streaming
    -- window over its output (lag, a running sum; an empty OVER keeps the ORDER BY's order). A
    -- window ordered by (rank, ts) with lead sorted inside the window operator: 16 ranks x 200k
    -- kernels, 1.2-1.5 s and 2.3-2.8 s of CPU against 1.1-1.3 s and 1.7-2.3 s. One pass over all
    -- ranks: a segment does not cross from one rank to the next.
    SELECT rank, lag(ts) OVER () AS start_ns,
           CASE WHEN lag(rank) OVER () = rank AND ts < 9223372036854775807 THEN ts END AS end_ns,
           sum(dp) OVER (ROWS UNBOUNDED PRECEDING) - dp AS p
    FROM (SELECT * FROM ev ORDER BY rank, ts)
),
decoded AS MATERIALIZED (  -- the streaming pass runs on one thread: what follows runs on all again
    SELECT rank, start_ns, end_ns,
           (p & 1152921504606846975::HUGEINT)::BIGINT AS counters,  -- bit operations: HUGEINT
           ((p >> 60) & 32767::HUGEINT)::INTEGER AS k,              -- division is slow
           (p >> 75)::BIGINT AS cur_step_rel
    FROM run
    WHERE end_ns > start_ns
)
SELECT s.rank,
       w.step,
       s.start_ns::BIGINT AS start_ns, s.end_ns::BIGINT AS end_ns,
       (s.counters & 32767)::INTEGER AS c,
       ((s.counters >> 15) & 32767)::INTEGER AS m,
       ((s.counters >> 30) & 32767)::INTEGER AS o,
       (s.counters >> 45)::INTEGER AS n,
       w.end_ns AS step_end_ns,
       s.k
FROM decoded AS s
LEFT JOIN base AS b ON b.rank = s.rank
LEFT JOIN (SELECT rank, step, end_ns FROM steps WHERE step IS NOT NULL) AS w
    ON w.rank = s.rank
   AND w.end_ns = (CASE WHEN s.cur_step_rel + b.base > s.start_ns THEN s.cur_step_rel + b.base END);
