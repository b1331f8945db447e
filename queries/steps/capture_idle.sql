-- capture_idle: per rank and window, the GPU idle that one-time phases (graph capture and
--   instantiation, torch.compile compilation: capture_phases) caused.
-- Why: these phases are one-time work (capture_phases): the launch-gap and host-bound idle they
--   cause (the GPU has nothing to run while launches only record graph nodes, or while the host
--   compiles) is not what the steady state loses, so the launch-bound / host-bound finding leaves
--   it out and the graph-capture and compile-phase notes quote it (docs/diagnose.md
--   `graph-capture`, `compile-phase`).
-- Columns: rank INTEGER, step BIGINT (NULL: the whole-capture window), idle_ns BIGINT ns (the
--   window's launch_gap and host_bound idle pieces (gaps) inside any one-time phase),
--   launch_gap_idle_ns BIGINT ns (the launch_gap part of idle_ns; the rest is host_bound), phase_ns
--   BIGINT ns (how much of the window the phases span), graph_idle_ns BIGINT ns (the part of the
--   idle inside graph capture / instantiation phases), compile_idle_ns BIGINT ns (the part inside
--   torch.compile phases; the two overlap where a capture runs inside a compile range).
-- Definition: a rank's capture_phases are merged into disjoint intervals (phases that overlap
--   count once), over all kinds (idle_ns, phase_ns), over the graph kinds (graph_idle_ns) and over
--   torch_compile (compile_idle_ns); each `gaps` piece of cause launch_gap or host_bound
--   contributes its overlap with them. phase_ns: the merged phases' overlap with the window
--   ([start_ns, end_ns) of `steps`, or tp_capture for the whole-capture window). Windows without a
--   phase have no row.
-- columns: rank, step, idle_ns, launch_gap_idle_ns, phase_ns, graph_idle_ns, compile_idle_ns
-- stage: rank
-- result: stored
-- requires: capture_phases, gaps, steps, tp_capture
CREATE OR REPLACE VIEW capture_idle AS
WITH tagged AS (
    SELECT rank, start_ns, end_ns, 'all' AS grp FROM capture_phases WHERE end_ns > start_ns
    UNION ALL
    SELECT rank, start_ns, end_ns, CASE WHEN kind = 'torch_compile' THEN 'compile' ELSE 'graph' END
    FROM capture_phases WHERE end_ns > start_ns
),
grouped AS (
    SELECT rank, grp, start_ns, end_ns,
           sum(CASE WHEN prev_end IS NULL OR start_ns > prev_end THEN 1 ELSE 0 END)
               OVER (PARTITION BY rank, grp ORDER BY start_ns, end_ns ROWS UNBOUNDED PRECEDING) AS g
    FROM (SELECT rank, grp, start_ns, end_ns,
                 max(end_ns) OVER (PARTITION BY rank, grp ORDER BY start_ns, end_ns
                                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
          FROM tagged)
),
phases AS (
    SELECT rank, grp, min(start_ns) AS start_ns, max(end_ns) AS end_ns FROM grouped GROUP BY rank, grp, g
),
windows AS (
    SELECT rank, step, start_ns, end_ns FROM steps WHERE step IS NOT NULL
    UNION ALL
    SELECT rank, NULL::BIGINT, start_ns, end_ns FROM tp_capture
),
in_windows AS (
    SELECT w.rank, w.step,
           sum(least(w.end_ns, p.end_ns) - greatest(w.start_ns, p.start_ns)) AS phase_ns
    FROM windows AS w JOIN phases AS p
      ON p.rank = w.rank AND p.start_ns < w.end_ns AND p.end_ns > w.start_ns
    WHERE p.grp = 'all'
    GROUP BY w.rank, w.step
),
idle AS (
    SELECT g.rank, g.step,
           sum(least(g.end_ns, p.end_ns) - greatest(g.start_ns, p.start_ns)) FILTER (WHERE p.grp = 'all')
               AS idle_ns,
           sum(least(g.end_ns, p.end_ns) - greatest(g.start_ns, p.start_ns))
               FILTER (WHERE p.grp = 'all' AND g.cause = 'launch_gap') AS launch_gap_idle_ns,
           sum(least(g.end_ns, p.end_ns) - greatest(g.start_ns, p.start_ns)) FILTER (WHERE p.grp = 'graph')
               AS graph_idle_ns,
           sum(least(g.end_ns, p.end_ns) - greatest(g.start_ns, p.start_ns)) FILTER (WHERE p.grp = 'compile')
               AS compile_idle_ns
    FROM gaps AS g JOIN phases AS p
      ON p.rank = g.rank AND p.start_ns < g.end_ns AND p.end_ns > g.start_ns
    WHERE g.cause IN ('launch_gap', 'host_bound')
    GROUP BY g.rank, g.step
)
SELECT w.rank, w.step, coalesce(i.idle_ns, 0)::BIGINT AS idle_ns,
       coalesce(i.launch_gap_idle_ns, 0)::BIGINT AS launch_gap_idle_ns, w.phase_ns::BIGINT AS phase_ns,
       coalesce(i.graph_idle_ns, 0)::BIGINT AS graph_idle_ns,
       coalesce(i.compile_idle_ns, 0)::BIGINT AS compile_idle_ns
FROM in_windows AS w
LEFT JOIN idle AS i ON i.rank = w.rank AND i.step IS NOT DISTINCT FROM w.step;
