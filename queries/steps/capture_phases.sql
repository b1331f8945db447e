-- capture_phases: the one-time phases of each rank: CUDA/HIP-graph capture and instantiation, and
--   torch.compile compilation.
-- Why: while a stream is captured into a graph, launch calls record work instead of running it,
--   so the GPU idles for as long as the host captures; instantiating the graph is host work too.
--   torch.compile's first call of a graph (Dynamo tracing, AOT autograd, Inductor lowering, Triton
--   compilation and autotuning) is seconds of host work with the GPU idle or running autotuning
--   benchmarks. Both are start-up costs paid once, not the steady state: read as steady state they
--   make a trace "99.9 % host-bound" and advise the CUDA graphs or the compilation being done. The
--   capture notes (docs/diagnose.md `graph-capture`, `compile-phase`) and the steady-state rules
--   (launch-bound, host-bound, gpu-starvation, gpu-low-utilisation, cuda-graph-candidates) read
--   this table to tell the two apart.
-- Columns: rank INTEGER, tid BIGINT (the capturing / compiling thread), kind VARCHAR
--   ('graph_capture': from a Stream BeginCapture call to the EndCapture call that closes it;
--   'graph_instantiate': one GraphInstantiate call; 'torch_compile': a run of overlapping
--   torch.compile ranges of one thread, the outermost ones' span), name VARCHAR (the call that opens
--   the phase; for torch_compile the first, outermost range's text, e.g.
--   '_compile.compile_inner (dynamo_timed)'), start_ns BIGINT ns, end_ns BIGINT ns (host time),
--   api_calls BIGINT (API calls of the thread starting in the phase, the phase's own calls
--   included), launches BIGINT (of them, calls whose name holds 'Launch': kernel and graph
--   launches), launches_run BIGINT (launches with a GPU operation of the same correlation id: a
--   captured launch has none, it only records a graph node; in a compile phase these are mostly
--   autotuning benchmarks).
-- Definition: cuda_api calls named (cuda|cu|hip)StreamBeginCapture*, ...StreamEndCapture*,
--   ...GraphInstantiate* (any ABI / per-thread suffix). Per (rank, tid) in time order, a begin
--   call pairs with the next capture call when that is an end call; a begin without one runs to
--   the rank's last API call's end (a capture the trace cut off). torch.compile: `nvtx` ranges
--   (Kineto `user_annotation`s land there, as nsys NVTX ranges do) whose text ends in
--   ' (dynamo_timed)', or holds it before the ', op_id = N' / ', sizes = ...' tail that
--   torch.autograd.profiler.emit_nvtx (nsys --pytorch=autograd-nvtx) appends: PyTorch 2.x's
--   `dynamo_timed` wraps every compile step in `record_function(f"{key} (dynamo_timed)")`,
--   whatever the key. Nested and overlapping ranges of
--   one (rank, tid) merge into one phase. The runtime markers of compiled code ('Torch-Compiled
--   Region', 'CompiledFunction', '## Call CompiledFxGraph ... ##', 'TorchDynamo Cache Lookup') run
--   every step and are not compile phases. Calls of the thread count when they start in
--   [start_ns, end_ns].
-- columns: rank, tid, kind, name, start_ns, end_ns, api_calls, launches, launches_run
-- stage: rank
-- result: stored
-- requires: cuda_api, gpu_ops, nvtx
CREATE OR REPLACE VIEW capture_phases AS
WITH marks AS (
    SELECT rank, tid, name, start_ns, end_ns,
           CASE WHEN regexp_matches(name, '^(cuda|cu|hip)StreamBeginCapture') THEN 'begin'
                WHEN regexp_matches(name, '^(cuda|cu|hip)StreamEndCapture') THEN 'end'
                ELSE 'instantiate' END AS mark
    FROM cuda_api
    WHERE regexp_matches(name, '^(cuda|cu|hip)(StreamBeginCapture|StreamEndCapture|GraphInstantiate)')
      AND start_ns IS NOT NULL AND end_ns IS NOT NULL
),
paired AS (
    SELECT rank, tid, name, mark, start_ns, end_ns,
           lead(mark) OVER w AS next_mark, lead(end_ns) OVER w AS next_end_ns
    FROM (SELECT * FROM marks WHERE mark <> 'instantiate')
    WINDOW w AS (PARTITION BY rank, tid ORDER BY start_ns, end_ns, name)
),
compiles AS (
    SELECT rank, tid, text, start_ns, end_ns
    FROM nvtx
    WHERE contains(text, ' (dynamo_timed)') AND regexp_matches(text, ' \(dynamo_timed\)($|, )')
      AND start_ns IS NOT NULL AND end_ns IS NOT NULL
      AND end_ns >= start_ns
),
compile_runs AS (
    SELECT *, sum(CASE WHEN prev_end IS NULL OR start_ns > prev_end THEN 1 ELSE 0 END)
                  OVER (PARTITION BY rank, tid ORDER BY start_ns, end_ns DESC, text
                        ROWS UNBOUNDED PRECEDING) AS run
    FROM (SELECT *, max(end_ns) OVER (PARTITION BY rank, tid ORDER BY start_ns, end_ns DESC, text
                                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
          FROM compiles)
),
phases AS (
    SELECT p.rank, p.tid, 'graph_capture' AS kind, p.name, p.start_ns,
           CASE WHEN p.next_mark = 'end' THEN p.next_end_ns
                ELSE (SELECT max(a.end_ns) FROM cuda_api AS a WHERE a.rank = p.rank) END AS end_ns
    FROM paired AS p
    WHERE p.mark = 'begin'
    UNION ALL
    SELECT rank, tid, 'graph_instantiate', name, start_ns, end_ns FROM marks WHERE mark = 'instantiate'
    UNION ALL
    SELECT rank, tid, 'torch_compile',
           arg_min(text, struct_pack(s := start_ns, e := -end_ns, t := text)), min(start_ns), max(end_ns)
    FROM compile_runs GROUP BY rank, tid, run
),
ran AS (
    SELECT DISTINCT rank, correlation_id FROM gpu_ops WHERE correlation_id IS NOT NULL
)
SELECT p.rank, p.tid, p.kind, p.name, p.start_ns::BIGINT AS start_ns, p.end_ns::BIGINT AS end_ns,
       count(a.rank) AS api_calls,
       count(a.rank) FILTER (WHERE a.name LIKE '%Launch%') AS launches,
       count(r.rank) FILTER (WHERE a.name LIKE '%Launch%') AS launches_run
FROM phases AS p
LEFT JOIN cuda_api AS a
    ON a.rank = p.rank AND a.tid IS NOT DISTINCT FROM p.tid AND a.start_ns >= p.start_ns AND a.start_ns <= p.end_ns
LEFT JOIN ran AS r ON r.rank = a.rank AND r.correlation_id = a.correlation_id
GROUP BY ALL;
