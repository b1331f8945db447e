-- hfu_window_kernels: per rank and `steps` window, the compute kernels that started in it and their
--   summed time.
-- Why: HFU and MFU are per window; without counted FLOPs (no Nsight Compute or CUPTI range data)
--   these two numbers are all the per-window table needs from the kernels, so mfu, diagnose and
--   the report read them here instead of joining every kernel of the job to its window.
-- Columns: rank INTEGER, step BIGINT (steps.step; NULL = the whole-capture window),
--   start_ns BIGINT ns, end_ns BIGINT ns (the window), kernels BIGINT (kernels of category other
--   than comms starting in [start_ns, end_ns)), kernel_ns HUGEINT ns (their summed durations,
--   end_ns - start_ns; 0 when none).
-- Definition: every `steps` row, with the non-comms kernels whose start lies in it (the windows of
--   a rank do not overlap: a kernel belongs to the last window starting at or before it).
-- columns: rank, step, start_ns, end_ns, kernels, kernel_ns
-- stage: rank
-- result: stored
-- requires: _kernel_windows, steps
CREATE OR REPLACE VIEW hfu_window_kernels AS
WITH placed AS (
    SELECT rank, step, window_start_ns AS start_ns, count(*) AS kernels, sum(end_ns - start_ns) AS kernel_ns
    FROM _kernel_windows
    WHERE NOT comms
    GROUP BY rank, step, window_start_ns
)
SELECT w.rank, w.step, w.start_ns, w.end_ns, coalesce(p.kernels, 0) AS kernels,
       coalesce(p.kernel_ns, 0::HUGEINT) AS kernel_ns
FROM steps w
LEFT JOIN placed p ON p.rank = w.rank AND p.start_ns = w.start_ns AND p.step IS NOT DISTINCT FROM w.step;
