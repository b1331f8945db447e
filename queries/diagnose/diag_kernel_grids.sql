-- diag_kernel_grids: per rank, window and kernel name, the launches of each grid size that may
--   leave SMs idle (fewer thread blocks than the GPU has SMs).
-- Why: the low-occupancy finding bounds the idle-SM time as duration x (1 - blocks / SMs); with
--   the launches grouped by grid size here (a handful of rows per kernel name and window), it does
--   not walk every kernel of the job at read time.
-- Columns: rank INTEGER, step BIGINT (the `steps` window holding the kernel's start; NULL: the
--   whole-capture window of tp_capture), window_ns BIGINT ns (that window's length),
--   name VARCHAR, blocks BIGINT (grid_x * grid_y * grid_z), sm_count INTEGER (the rank's GPU,
--   gpus.sm_count; NULL when the trace has none), launches BIGINT, total_ns BIGINT ns (summed
--   durations).
-- Definition: kernels of category other than comms with a grid, in each step window
--   [start_ns, end_ns) holding their start and in the rank's capture window; kept when
--   blocks < sm_count, or all when sm_count is unknown (diagnose's sm_count_default then decides).
-- columns: rank, step, window_ns, name, blocks, sm_count, launches, total_ns
-- stage: rank
-- result: stored
-- requires: kernels, gpus, steps, tp_capture
CREATE OR REPLACE VIEW diag_kernel_grids AS
WITH sm AS (SELECT rank, max(sm_count) AS sm FROM gpus GROUP BY rank),
k AS (
    SELECT k.rank, k.name, k.start_ns, k.end_ns - k.start_ns AS duration_ns,
           CAST(k.grid_x AS BIGINT) * k.grid_y * k.grid_z AS blocks, sm.sm
    FROM kernels k LEFT JOIN sm ON sm.rank = k.rank
    WHERE k.category IS DISTINCT FROM 'comms' AND k.grid_x IS NOT NULL
      AND (sm.sm IS NULL OR CAST(k.grid_x AS BIGINT) * k.grid_y * k.grid_z < sm.sm)
),
placed AS (   -- steps tile the timeline without overlap: the last window starting before the kernel
    SELECT k.*, w.step, w.end_ns - w.start_ns AS window_ns
    FROM k ASOF JOIN (SELECT rank, step, start_ns, end_ns FROM steps WHERE step IS NOT NULL) w
      ON w.rank = k.rank AND w.start_ns <= k.start_ns
    WHERE k.start_ns < w.end_ns
    UNION ALL
    SELECT k.*, NULL::BIGINT AS step, c.end_ns - c.start_ns AS window_ns
    FROM k JOIN tp_capture c ON c.rank = k.rank AND k.start_ns >= c.start_ns AND k.start_ns < c.end_ns
)
SELECT rank, step, window_ns, name, blocks, sm AS sm_count, count(*) AS launches,
       CAST(sum(duration_ns) AS BIGINT) AS total_ns
FROM placed GROUP BY rank, step, window_ns, name, blocks, sm;
