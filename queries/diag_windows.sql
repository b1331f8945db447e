-- diag_windows: the time-partition rows that `diagnose` treats as the job's steps.
-- Why: recoverable time is quoted per training step; when no rank has step windows (no NVTX
-- steps, none detected) the whole capture is the only "step", so every rule divides by the
-- same step count and the numbers of different rules stay comparable.
-- Columns: every column of time_partition (rank, step, window_ns, compute_ns, ..., overlap_pct;
--   ns unless named), restricted to step rows, or to the step-NULL rows when there are none.
-- Definition: time_partition WHERE step IS NOT NULL, or WHERE step IS NULL when no row has a step.
-- columns: rank, step, window_ns, compute_ns, memory_ns, other_ns, comms_exposed_ns, idle_ns, launch_gap_ns, input_stall_ns, sync_stall_ns, host_bound_ns, idle_other_ns, comms_total_ns, comms_hidden_ns, overlap_pct
-- stage: job
-- result: stored
-- requires: time_partition
CREATE OR REPLACE VIEW diag_windows AS
SELECT * FROM time_partition
WHERE CASE WHEN EXISTS (SELECT 1 FROM time_partition WHERE step IS NOT NULL)
           THEN step IS NOT NULL ELSE step IS NULL END;
