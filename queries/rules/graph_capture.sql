-- The statements of the `graph-capture` and `compile-phase` capture findings (nsight_analyze/rules/graph_capture.py).

-- name: graph_phases_per_rank
-- Per rank, the stream captures and graph instantiations (capture_phases' graph kinds), their
-- host time and the launch calls inside the captures (how many ran).
SELECT rank, count(*) FILTER (WHERE kind = 'graph_capture') AS captures,
       count(*) FILTER (WHERE kind = 'graph_instantiate') AS instantiations,
       sum(end_ns - start_ns) AS phase_ns, sum(launches) AS launches,
       sum(launches_run) FILTER (WHERE kind = 'graph_capture') AS launches_run,
       sum(launches) FILTER (WHERE kind = 'graph_capture') AS captured
FROM capture_phases WHERE kind IN ('graph_capture', 'graph_instantiate') GROUP BY rank ORDER BY rank

-- name: graph_idle_total
-- The GPU idle inside the graph phases; $in_steps: the windows read (in steps or, without steps,
-- the capture).
SELECT coalesce(sum(graph_idle_ns), 0) FROM capture_idle WHERE $in_steps

-- name: graph_phases
SELECT * FROM capture_phases WHERE kind IN ('graph_capture', 'graph_instantiate') ORDER BY rank, start_ns, tid

-- name: graph_idle_per_window
SELECT rank, step, graph_idle_ns, idle_ns, phase_ns FROM capture_idle
WHERE graph_idle_ns > 0 ORDER BY rank, step

-- name: compile_phases_per_rank
-- Per rank, the torch.compile phases, their host time, the launches inside (how many ran) and the
-- longest phase's name.
SELECT rank, count(*) AS phases, sum(end_ns - start_ns) AS phase_ns,
       sum(launches) AS launches, sum(launches_run) AS launches_run,
       arg_max(name, struct_pack(d := end_ns - start_ns, s := -start_ns, n := name)) AS longest
FROM capture_phases WHERE kind = 'torch_compile' GROUP BY rank ORDER BY rank

-- name: compile_idle_total
-- The GPU idle inside the compile phases; $in_steps as in graph_idle_total.
SELECT coalesce(sum(compile_idle_ns), 0) FROM capture_idle WHERE $in_steps

-- name: compile_steps
-- The steps holding compilation: each phase in the one step window it overlaps most (a phase may
-- run past the GPU-projected end of its step's window: that is not a second compiling step).
SELECT DISTINCT step FROM (
    SELECT p.rank, p.tid, p.start_ns,
           arg_max(s.step, struct_pack(o := least(p.end_ns, s.end_ns)
                                            - greatest(p.start_ns, s.start_ns),
                                       n := -s.step)) AS step
    FROM capture_phases p JOIN steps s
      ON s.rank = p.rank AND p.start_ns < s.end_ns AND p.end_ns > s.start_ns
    WHERE p.kind = 'torch_compile' AND s.step IS NOT NULL
    GROUP BY p.rank, p.tid, p.start_ns)
ORDER BY 1

-- name: compile_phases
SELECT * FROM capture_phases WHERE kind = 'torch_compile' ORDER BY rank, start_ns, tid

-- name: compile_ranges
-- The `dynamo_timed` ranges themselves, longest first (the pattern's end-of-text `$` is written `$$`).
SELECT rank, tid, text, start_ns, end_ns, end_ns - start_ns AS duration_ns FROM nvtx
WHERE regexp_matches(text, ' \(dynamo_timed\)($$|, )') AND end_ns IS NOT NULL
ORDER BY duration_ns DESC, rank, start_ns, text

-- name: compile_idle_per_window
SELECT rank, step, compile_idle_ns, idle_ns, phase_ns FROM capture_idle
WHERE compile_idle_ns > 0 ORDER BY rank, step
