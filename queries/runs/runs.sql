-- The statements of `runs`: one row per run (job), its labels, memory peak and communication (nsight_analyze/runs/__init__.py).

-- name: run_metrics
-- One row per job: the step statistics over the steps every rank of the job has, and the
-- partition shares (over those steps, else the whole capture). A step's job step time is its
-- longest window over the ranks (docs/metrics.md "Job step time"); the loss parts are means over
-- the ranks per step (ns), then means over the steps, and tile the mean job step time exactly:
--   step = busy + exposed_comms + imbalance + idle, with
--   busy = compute + memory + other, imbalance = (step - mean window) + w,
--   exposed_comms = exposed - w, w = min(exposed, max compute - mean compute): the wait the
--   faster ranks spend in collectives for the slowest rank's compute (queries/job/imbalance.sql).
WITH rj AS (SELECT rank, job FROM ranks WHERE job IS NOT NULL),
nr AS (SELECT job, count(*) AS n FROM rj GROUP BY job),
tp AS (SELECT rj.job, t.* FROM time_partition AS t JOIN rj USING (rank)),
st AS (
    SELECT job, step, count(*) AS have,
           max(window_ns) AS step_ns, avg(window_ns) AS mean_window_ns,
           avg(compute_ns + memory_ns + other_ns) AS busy_ns,
           avg(comms_exposed_ns) AS exposed_ns, avg(idle_ns) AS idle_ns,
           least(avg(comms_exposed_ns), max(compute_ns) - avg(compute_ns)) AS wait_ns,
           avg(launch_gap_ns) AS launch_gap_ns, avg(input_stall_ns) AS input_stall_ns,
           avg(sync_stall_ns) AS sync_stall_ns, avg(host_bound_ns) AS host_bound_ns,
           avg(idle_other_ns) AS idle_other_ns,
           sum(window_ns) AS w, sum(compute_ns) AS c, sum(memory_ns) AS m, sum(other_ns) AS o,
           sum(comms_exposed_ns) AS e, sum(idle_ns) AS i, sum(comms_total_ns) AS ct,
           sum(comms_hidden_ns) AS ch, sum(memory_kernels_ns) AS mk, sum(copies_ns) AS cp
    FROM tp WHERE step IS NOT NULL GROUP BY job, step
),
-- the steady steps of the run (queries/steps/job_steps.sql) that every rank of it has
full_steps AS (
    SELECT st.* FROM st JOIN nr USING (job) LEFT JOIN job_steps AS j USING (job, step)
    WHERE st.have = nr.n AND coalesce(j.steady, true)
),
per_step AS (
    SELECT job, count(*) AS steps,
           median(step_ns) AS step_median_ns, quantile_cont(step_ns, 0.95) AS step_p95_ns,
           avg(step_ns) AS step_mean_ns,
           avg(busy_ns) AS compute_step_ns, avg(exposed_ns - wait_ns) AS exposed_comms_step_ns,
           avg(step_ns - mean_window_ns + wait_ns) AS imbalance_step_ns, avg(idle_ns) AS idle_step_ns,
           avg(launch_gap_ns) AS launch_gap_step_ns, avg(input_stall_ns) AS input_stall_step_ns,
           avg(sync_stall_ns) AS sync_stall_step_ns, avg(host_bound_ns) AS host_bound_step_ns,
           avg(idle_other_ns) AS idle_other_step_ns,
           sum(w) AS w, sum(c) AS c, sum(m) AS m, sum(o) AS o, sum(e) AS e, sum(i) AS i,
           sum(ct) AS ct, sum(ch) AS ch, sum(mk) AS mk, sum(cp) AS cp
    FROM full_steps GROUP BY job
),
whole AS (
    SELECT job, sum(window_ns) AS w, sum(compute_ns) AS c, sum(memory_ns) AS m, sum(other_ns) AS o,
           sum(comms_exposed_ns) AS e, sum(idle_ns) AS i, sum(comms_total_ns) AS ct,
           sum(comms_hidden_ns) AS ch, sum(memory_kernels_ns) AS mk, sum(copies_ns) AS cp
    FROM tp WHERE step IS NULL GROUP BY job
),
shares AS (
    SELECT coalesce(p.job, h.job) AS job,
           CASE WHEN p.job IS NOT NULL THEN 'steps' ELSE 'capture' END AS shares_over,
           coalesce(p.w, h.w) AS w, coalesce(p.c, h.c) AS c, coalesce(p.m, h.m) AS m,
           coalesce(p.o, h.o) AS o, coalesce(p.e, h.e) AS e, coalesce(p.i, h.i) AS i,
           coalesce(p.ct, h.ct) AS ct, coalesce(p.ch, h.ch) AS ch,
           CASE WHEN p.job IS NOT NULL THEN p.mk ELSE h.mk END AS mk,
           CASE WHEN p.job IS NOT NULL THEN p.cp ELSE h.cp END AS cp
    FROM (SELECT * FROM per_step WHERE steps > 0) AS p FULL JOIN whole AS h ON h.job = p.job
),
gpu AS (
    SELECT job, string_agg(DISTINCT regexp_replace(gpu_name, '^NVIDIA ', ''), ', ' ORDER BY
               regexp_replace(gpu_name, '^NVIDIA ', '')) AS gpu
    FROM ranks WHERE job IS NOT NULL AND gpu_name IS NOT NULL AND gpu_name <> '' GROUP BY job
)
SELECT j.job, j.ranks, j.world_size, j.complete, j.label AS ranks_label, j.capture_start_utc_ns,
       g.gpu, coalesce(p.steps, 0) AS steps, p.step_median_ns, p.step_p95_ns, p.step_mean_ns,
       p.compute_step_ns, p.exposed_comms_step_ns, p.imbalance_step_ns, p.idle_step_ns,
       p.launch_gap_step_ns, p.input_stall_step_ns, p.sync_stall_step_ns, p.host_bound_step_ns,
       p.idle_other_step_ns,
       s.shares_over,
       s.c / nullif(s.w, 0) AS compute_share, s.m / nullif(s.w, 0) AS memory_share,
       s.mk / nullif(s.w, 0) AS memory_kernels_share, s.cp / nullif(s.w, 0) AS copies_share,
       s.o / nullif(s.w, 0) AS other_share, s.e / nullif(s.w, 0) AS exposed_comms_share,
       s.i / nullif(s.w, 0) AS idle_share,
       CASE WHEN s.ct > 0 THEN s.ch / s.ct END AS overlap,
       v.verdict AS straggler_verdict, v.straggler_rank, v.straggler_delay_ns, v.straggler_cost_ns
FROM jobs AS j
LEFT JOIN per_step AS p ON p.job = j.job
LEFT JOIN shares AS s ON s.job = j.job
LEFT JOIN gpu AS g ON g.job = j.job
LEFT JOIN merge_straggler_verdict AS v ON v.job = j.job
ORDER BY j.job

-- name: run_dimensions
-- Per run and parallelism dimension (comm_groups: queries/comms/comm_groups.sql): its collective time
-- and exposed time (sums over the run's ranks and the whole capture) per rank present, its share
-- of the run's exposed collective time, and the bus bandwidth (time-weighted over the
-- communicators that have one; unknown without payload sizes). Which collectives: `ops`.
WITH nr AS (SELECT job, count(*) AS n FROM ranks WHERE job IS NOT NULL GROUP BY job),
o AS (
    SELECT job, dimension, string_agg(DISTINCT op, ',' ORDER BY op) AS ops
    FROM comm_groups, unnest(string_split(ops, ',')) AS u(op) GROUP BY job, dimension
),
d AS (
    SELECT job, dimension, count(DISTINCT group_key) AS communicators, sum(total_ns) AS total_ns,
           sum(exposed_ns) AS exposed_ns,
           sum(busbw_gbps * total_ns) FILTER (WHERE busbw_gbps IS NOT NULL)
               / nullif(sum(total_ns) FILTER (WHERE busbw_gbps IS NOT NULL), 0) AS busbw_gbps,
           CASE WHEN count(DISTINCT link) = 1 THEN min(link) ELSE 'mixed' END AS link
    FROM comm_groups GROUP BY job, dimension
)
SELECT d.job, d.dimension, o.ops, d.communicators, d.link,
       d.total_ns / nr.n AS total_per_rank_ns, d.exposed_ns / nr.n AS exposed_per_rank_ns,
       d.exposed_ns / nullif(sum(d.exposed_ns) OVER (PARTITION BY d.job), 0) AS exposed_share,
       d.busbw_gbps
FROM d JOIN nr USING (job) JOIN o USING (job, dimension)
ORDER BY d.job, d.exposed_ns DESC, d.dimension

-- name: run_memory_peaks
-- Per run: the device-memory peak (memory_peak: one row per rank, device and source of the
-- memory_usage rows, queries/partition/memory_peak.sql) as its largest over the run's ranks, the
-- rank that holds it (the lowest of equal ones), and how many of the run's ranks have any.
SELECT r.job, max(m.peak_bytes_in_use) AS peak_bytes,
       arg_max(m.rank, (m.peak_bytes_in_use, -m.rank)) AS peak_rank,
       count(DISTINCT m.rank) AS ranks_with
FROM memory_peak AS m JOIN ranks AS r USING (rank)
WHERE r.job IS NOT NULL AND m.peak_bytes_in_use IS NOT NULL
GROUP BY r.job ORDER BY r.job

-- name: run_label_values
-- Per run and label key of the user's labels (run_labels, by the run's files): the distinct
-- values its files give and where they come from (a run whose files disagree has several).
SELECT r.job, l.key, list(DISTINCT l.value ORDER BY l.value) AS vals,
       list(DISTINCT l.source ORDER BY l.source) AS sources
FROM run_labels AS l JOIN (SELECT DISTINCT file_id, job FROM ranks WHERE job IS NOT NULL) AS r
  ON r.file_id = l.file_id
GROUP BY r.job, l.key ORDER BY r.job, l.key

-- name: unscoped_tables
-- The stored results a job scope computed for its session and moved aside (TEMP tables named
-- _unscoped_<name>: store/job_scope.py), to be put back under their names when the scope ends.
SELECT table_name FROM duckdb_tables() WHERE temporary AND starts_with(table_name, '_unscoped_')

-- name: restore_unscoped
-- One of those ($name) back under its own name ($original).
ALTER TABLE temp.main."$name" RENAME TO "$original"
