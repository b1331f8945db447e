-- _tp_detected_steps: steps detected from the rank's own periodic pattern, for ranks without NVTX steps.
-- Why: many captures have no step annotations. The optimizer update closes every training step, so
-- its kernels are a reliable step delimiter; without them, kernels that run exactly once per step
-- (the loss, the gradient all-reduce of a bucket, the norm) repeat with the step's period.
-- Columns: rank INTEGER, step BIGINT (0-based), start_ns BIGINT ns, end_ns BIGINT ns,
--   method VARCHAR: 'optimizer' | 'periodic', marker VARCHAR (the periodic kernel's name; NULL for
--   optimizer bursts).
-- Definition: optimizer: marker kernels are kernels whose name matches
--   '(?i)(adam|sgd|adagrad|rmsprop|adafactor|optimi[sz]er)'. In the rank's GPU operations
--   ordered by (start_ns, end_ns, correlation_id), a burst is a maximal run of consecutive marker
--   kernels; E_i = running max of the burst ends. Step i's window is [E_{i-1}, E_i); step 0 starts
--   at the rank's first GPU operation. Operations after the last burst (an incomplete step) are in
--   the whole-capture window only. Detection needs at least 2 bursts.
--   periodic (ranks without optimizer kernels): a kernel name is regular when it runs n >= 3 times
--   and every interval between its starts is within 10 % of their mean, its runs spanning at
--   least half the rank's GPU activity (a pattern in a corner of the capture is not the step).
--   The step count is the n that the most regular names share, at least two (one name alone may
--   be a periodic side task; ties: the smallest n), so a few kernels that repeat every second
--   step (CloverLeaf's advection alternates its sweep order) do not make double steps; of those
--   names, the marker is the one whose first run comes last within the first period (the
--   closest to the step's end). Its runs then delimit the steps like the
--   optimizer bursts, provided they tile the capture: the GPU activity up to the end of the
--   first run (step 0) and after the end of the last each last at most two mean periods (an
--   incomplete step plus start-up or shut-down work; CloverLeaf's set-up makes its step 0 1.4
--   periods long). Why so strict: a kernel that repeats once per layer also looks periodic, and
--   on windows cut from inside one long step no steps must be claimed: nsys-ai's
--   mfu_2gpu_before (FSDP blocks of one forward pass) and TraceLens b200 (MoE layers) have
--   layer intervals off their mean by over 10 %; h100_2gpu_1s (24 FP32 encoder layers) leaves
--   9.6 periods of other work after its last layer. Neither is tried on ranks with NVTX ranges
--   matching the step pattern.
-- columns: rank, step, start_ns, end_ns, method, marker
-- stage: rank
-- result: view
-- requires: _tp_nvtx_step_ranges, gpu_ops
CREATE OR REPLACE VIEW _tp_detected_steps AS
WITH undetermined AS (
    -- detection is only tried on ranks without NVTX step ranges
    SELECT rank, start_ns, end_ns, correlation_id, op, name
    FROM gpu_ops
    WHERE rank NOT IN (SELECT rank FROM _tp_nvtx_step_ranges)
),
marker_names AS (
    -- the pattern is tested once per distinct kernel name, not once per kernel
    SELECT name
    FROM (SELECT DISTINCT name FROM undetermined WHERE op = 'kernel' AND name IS NOT NULL)
    WHERE regexp_matches(lower(name), 'adam|sgd|adagrad|rmsprop|adafactor|optimizer|optimiser')
),
optimizer_ranks AS (
    SELECT DISTINCT rank FROM undetermined WHERE op = 'kernel' AND name IN (SELECT name FROM marker_names)
),
runs AS (
    -- ranks without optimizer kernels: every kernel name's runs, with the interval to the next
    SELECT rank, name, start_ns,
           lead(start_ns) OVER (PARTITION BY rank, name ORDER BY start_ns, end_ns, correlation_id)
               - start_ns AS gap
    FROM undetermined
    WHERE op = 'kernel' AND name IS NOT NULL AND rank NOT IN (SELECT rank FROM optimizer_ranks)
),
span AS (
    SELECT rank, min(start_ns) AS first_ns, max(end_ns) AS last_ns, max(end_ns) - min(start_ns) AS span_ns
    FROM undetermined
    GROUP BY rank
),
regular AS (
    SELECT r.rank, r.name, count(*) AS n, min(r.start_ns) AS first_ns, avg(r.gap) AS period
    FROM runs AS r JOIN span AS s USING (rank)
    GROUP BY r.rank, r.name
    HAVING count(*) >= 3 AND avg(r.gap) > 0
       AND max(r.gap) <= 1.1 * avg(r.gap) AND min(r.gap) >= 0.9 * avg(r.gap)
       AND (count(*) - 1) * avg(r.gap) >= 0.5 * any_value(s.span_ns)
),
step_count AS (
    SELECT rank, n
    FROM (SELECT rank, n, count(*) AS names FROM regular GROUP BY rank, n HAVING count(*) >= 2)
    QUALIFY row_number() OVER (PARTITION BY rank ORDER BY names DESC, n) = 1
),
periodic_marker AS (
    SELECT r.rank, arg_max(r.name, r.first_ns) AS name
    FROM regular AS r
    JOIN step_count AS c ON c.rank = r.rank AND c.n = r.n
    JOIN (SELECT r.rank, min(r.first_ns) AS t0, min(r.period) AS period
          FROM regular AS r JOIN step_count AS c ON c.rank = r.rank AND c.n = r.n
          GROUP BY r.rank) AS w ON w.rank = r.rank
    WHERE r.first_ns < w.t0 + w.period
    GROUP BY r.rank
),
cand AS (
    SELECT rank, start_ns, end_ns, correlation_id,
           op = 'kernel' AND name IN (SELECT name FROM marker_names) AS marker, 'optimizer' AS method,
           NULL::VARCHAR AS marker_name
    FROM undetermined
    WHERE rank IN (SELECT rank FROM optimizer_ranks)
    UNION ALL
    SELECT u.rank, u.start_ns, u.end_ns, u.correlation_id, u.op = 'kernel' AND u.name = m.name, 'periodic', m.name
    FROM undetermined AS u JOIN periodic_marker AS m USING (rank)
),
numbered AS (
    SELECT rank, end_ns, marker,
           row_number() OVER (PARTITION BY rank ORDER BY start_ns, end_ns, correlation_id) AS rn
    FROM cand
),
markers AS (
    SELECT rank, end_ns,
           rn - row_number() OVER (PARTITION BY rank ORDER BY rn) AS island
    FROM numbered
    WHERE marker
),
bursts AS (
    SELECT rank, island, max(end_ns) AS burst_end FROM markers GROUP BY rank, island
),
ordered AS (
    SELECT rank,
           row_number() OVER (PARTITION BY rank ORDER BY island) - 1 AS step,
           max(burst_end) OVER (PARTITION BY rank ORDER BY island ROWS UNBOUNDED PRECEDING) AS e,
           count(*) OVER (PARTITION BY rank) AS n_bursts
    FROM bursts
),
windows AS (
    SELECT o.rank, o.step,
           coalesce(lag(o.e) OVER (PARTITION BY o.rank ORDER BY o.step), c.start_ns) AS start_ns,
           o.e AS end_ns, c.method, c.marker_name
    FROM ordered AS o
    JOIN (SELECT rank, min(start_ns) AS start_ns, any_value(method) AS method,
                 any_value(marker_name) AS marker_name
          FROM cand GROUP BY rank) AS c USING (rank)
    WHERE o.n_bursts >= 2
),
untiled AS (
    -- periodic runs that leave more than two periods of the capture before or after them
    SELECT w.rank
    FROM windows AS w JOIN span AS s USING (rank)
    WHERE w.method = 'periodic'
    GROUP BY w.rank
    HAVING max(w.end_ns) FILTER (WHERE w.step = 0) - any_value(s.first_ns)
               > 2 * avg(w.end_ns - w.start_ns) FILTER (WHERE w.step > 0)
        OR any_value(s.last_ns) - max(w.end_ns) > 2 * avg(w.end_ns - w.start_ns) FILTER (WHERE w.step > 0)
)
SELECT rank, step, start_ns::BIGINT AS start_ns, end_ns::BIGINT AS end_ns, method, marker_name AS marker
FROM windows
WHERE end_ns > start_ns AND rank NOT IN (SELECT rank FROM untiled);
