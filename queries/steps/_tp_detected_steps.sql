-- _tp_detected_steps: steps detected from the rank's own periodic pattern, for ranks without NVTX steps.
-- Why: many captures have no step annotations. The optimizer update closes every training step, so
-- its kernels are a reliable step delimiter; without them, kernels that run exactly once per step
-- (the loss, the gradient all-reduce of a bucket, the norm) repeat with the step's period.
-- Columns: rank INTEGER, step BIGINT (0-based), start_ns BIGINT ns, end_ns BIGINT ns,
--   method VARCHAR (what set the step's end: 'optimizer' | 'periodic' (the detector's boundary),
--   'graph replay' | 'annotation' (a boundary moved to the end of indivisible work, below)),
--   marker VARCHAR (the periodic kernel's name; NULL for optimizer bursts), detector VARCHAR
--   ('optimizer' | 'periodic': which detector found the rank's boundaries; settings.periodic_steps
--   reads it).
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
--   Indivisible work: a boundary (a running max E_i) never falls inside the GPU work of one host
--   call or one annotation. Such a unit is the span [first start, last end) of the GPU operations
--   that one launch call issued (same rank and correlation_id; two or more, as a graph launch's
--   replay) or that one NVTX / user annotation range launched (nvtx_gpu_projection, two or more);
--   overlapping units merge (strict overlap: units that only touch stay apart). A boundary
--   strictly inside a unit moves to the unit's end, and boundaries that then coincide are one:
--   the steps between them merge (and are numbered again from 0); a merged step's method says what
--   merged it: 'graph replay' when a launch call's unit is in the merged unit, else 'annotation'
--   (a boundary moved alone, merging nothing, keeps the detector's label). TraceLens's vLLM decode replay (graph_execution) has one hipGraphLaunch
--   replaying 421 of 425 kernels under one annotation: its once-per-layer kernels would cut it
--   into 12 "steps" of two layers; it is one step (its graph launch alone makes it one).
--   An annotation is indivisible only on ranks of the periodic detector (an optimizer burst ends
--   a training step by definition: a range around several bursts is a loop around steps), and
--   not when it holds several repetitions that annotations nested in it delimit: an annotation
--   on the same thread inside it whose text repeats, two or more of its instances each holding a
--   detected boundary (in (projected start, projected end]). A range "train" around ten steps,
--   each step inside its own "forward" / "backward" ranges, is a loop, not one step; a range
--   with no such children (vLLM's execute_model) is one unit of work. Limit: a loop range whose
--   steps carry no annotations of their own cannot be told from one step, and merges them.
--   The tiling test above is made on the merged steps (one merged step passes it).
-- columns: rank, step, start_ns, end_ns, method, marker, detector
-- stage: rank
-- result: view
-- requires: _tp_nvtx_step_ranges, gpu_ops, cuda_api, nvtx_gpu_projection
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
raw_ends AS (
    SELECT rank,
           max(burst_end) OVER (PARTITION BY rank ORDER BY island ROWS UNBOUNDED PRECEDING) AS e,
           count(*) OVER (PARTITION BY rank) AS n_bursts
    FROM bursts
),
annotations AS (
    -- annotations that launched GPU work on the periodic detector's ranks
    SELECT rank, tid, start_ns, end_ns, level, text, projected_start_ns, projected_end_ns, num_gpu_ops
    FROM nvtx_gpu_projection
    WHERE rank IN (SELECT rank FROM raw_ends) AND rank IN (SELECT rank FROM periodic_marker)
),
held AS (
    -- each annotation with every detected boundary it holds (in (projected start, projected end]):
    -- a boundary is held by its chain of nested ranges only, so this stays small
    SELECT a.rank, a.tid, a.start_ns, a.end_ns, a.level, a.text, r.e
    FROM annotations AS a
    JOIN raw_ends AS r ON r.rank = a.rank AND r.e > a.projected_start_ns AND r.e <= a.projected_end_ns
),
loops AS (
    -- annotations holding repetitions that nested annotations delimit: a child text (same thread,
    -- inside the parent's range) two or more of whose instances each hold a detected boundary
    SELECT DISTINCT rank, tid, start_ns, end_ns
    FROM (SELECT p.rank, p.tid, p.start_ns, p.end_ns, c.text
          FROM held AS p
          JOIN held AS c
            ON c.rank = p.rank AND c.tid = p.tid AND c.e = p.e
           AND c.start_ns >= p.start_ns AND c.end_ns <= p.end_ns
           AND (c.start_ns > p.start_ns OR c.end_ns < p.end_ns OR c.level > p.level)
          GROUP BY p.rank, p.tid, p.start_ns, p.end_ns, p.level, c.text
          HAVING count(DISTINCT (c.start_ns, c.end_ns)) >= 2)
),
units AS (
    -- indivisible GPU work of the ranks tried: one launch call's operations (a graph replay) ...
    SELECT u.rank, min(u.start_ns) AS s, max(u.end_ns) AS e, 'graph replay' AS kind
    FROM undetermined AS u
    SEMI JOIN cuda_api AS a ON a.rank = u.rank AND a.correlation_id = u.correlation_id
    WHERE u.rank IN (SELECT rank FROM raw_ends)
    GROUP BY u.rank, u.correlation_id
    HAVING count(*) >= 2
    UNION ALL
    -- ... and one annotation's, unless it is a loop around repetitions
    SELECT rank, projected_start_ns, projected_end_ns, 'annotation'
    FROM annotations AS a
    WHERE num_gpu_ops >= 2
      AND NOT EXISTS (SELECT 1 FROM loops AS l
                      WHERE l.rank = a.rank AND l.tid = a.tid AND l.start_ns = a.start_ns
                        AND l.end_ns = a.end_ns)
),
unit_groups AS (
    SELECT rank, s, e, kind,
           sum(CASE WHEN prev_e IS NULL OR s >= prev_e THEN 1 ELSE 0 END)
               OVER (PARTITION BY rank ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS g
    FROM (SELECT rank, s, e, kind,
                 max(e) OVER (PARTITION BY rank ORDER BY s, e
                              ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_e
          FROM units WHERE e > s)
),
merged_units AS (
    -- 'graph replay' when a launch call's unit is in the group ('graph replay' > 'annotation')
    SELECT rank, min(s) AS s, max(e) AS e, max(kind) AS kind FROM unit_groups GROUP BY rank, g
),
snapped AS (
    -- a boundary strictly inside a unit moves to its end (units are disjoint: one match at most)
    SELECT r.rank, coalesce(u.e, r.e) AS e, r.n_bursts, u.kind
    FROM raw_ends AS r
    LEFT JOIN merged_units AS u ON u.rank = r.rank AND u.s < r.e AND r.e < u.e
),
ordered AS (
    -- a unit's label only where it merged steps (several boundaries moved to one end); a boundary
    -- moved alone keeps the detector's
    SELECT rank, row_number() OVER (PARTITION BY rank ORDER BY e) - 1 AS step, e, n_bursts, kind
    FROM (SELECT rank, e, max(n_bursts) AS n_bursts, CASE WHEN count(*) >= 2 THEN max(kind) END AS kind
          FROM snapped GROUP BY rank, e)
),
windows AS (
    SELECT o.rank, o.step,
           coalesce(lag(o.e) OVER (PARTITION BY o.rank ORDER BY o.step), c.start_ns) AS start_ns,
           o.e AS end_ns, coalesce(o.kind, c.method) AS method, c.marker_name, c.method AS detector
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
    WHERE w.detector = 'periodic'
    GROUP BY w.rank
    HAVING max(w.end_ns) FILTER (WHERE w.step = 0) - any_value(s.first_ns)
               > 2 * avg(w.end_ns - w.start_ns) FILTER (WHERE w.step > 0)
        OR any_value(s.last_ns) - max(w.end_ns) > 2 * avg(w.end_ns - w.start_ns) FILTER (WHERE w.step > 0)
)
SELECT rank, step, start_ns::BIGINT AS start_ns, end_ns::BIGINT AS end_ns, method, marker_name AS marker,
       detector
FROM windows
WHERE end_ns > start_ns AND rank NOT IN (SELECT rank FROM untiled);
