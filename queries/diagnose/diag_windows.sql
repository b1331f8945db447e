-- diag_windows: the time-partition rows that `diagnose` treats as the job's steps.
-- Why: recoverable time is quoted per training step; when no rank has step windows (no NVTX
-- steps, none detected) the whole capture is the only "step", so every rule divides by the
-- same step count and the numbers of different rules stay comparable.
-- Columns: every column of time_partition (rank, step, window_ns, compute_ns, ..., overlap_pct;
--   ns unless named), restricted to step rows, or to the step-NULL rows when there are none.
-- Definition: per job (ranks.job: a workspace may hold unrelated jobs, docs/metrics.md "Jobs"),
-- time_partition WHERE step IS NOT NULL, or WHERE step IS NULL when no rank of the job has a step.
-- columns: rank, step, window_ns, compute_ns, memory_ns, other_ns, comms_exposed_ns, idle_ns, launch_gap_ns, input_stall_ns, sync_stall_ns, host_bound_ns, idle_other_ns, comms_total_ns, comms_hidden_ns, overlap_pct, memory_kernels_ns, copies_ns, copies_total_ns
-- stage: job
-- result: stored
-- requires: ranks, time_partition
CREATE OR REPLACE VIEW diag_windows AS
WITH dw_job AS (
    SELECT r.rank, coalesce(r.job, 1) AS job FROM ranks AS r
),
dw_has AS (
    SELECT j.job, bool_or(t.step IS NOT NULL) AS has_steps
    FROM time_partition AS t JOIN dw_job AS j ON j.rank = t.rank GROUP BY j.job
)
SELECT t.* FROM time_partition AS t
JOIN dw_job AS j ON j.rank = t.rank
JOIN dw_has AS h ON h.job = j.job
WHERE CASE WHEN h.has_steps THEN t.step IS NOT NULL ELSE t.step IS NULL END;
