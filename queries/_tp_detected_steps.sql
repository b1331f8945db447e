-- _tp_detected_steps: steps detected from the periodic optimizer pattern, for ranks without NVTX steps.
-- Why: many captures have no step annotations; the optimizer update closes every training step,
-- so its kernels are a reliable step delimiter.
-- Columns: rank INTEGER, step BIGINT (0-based), start_ns BIGINT ns, end_ns BIGINT ns.
-- Definition: marker kernels are kernels whose name matches
--   '(?i)(adam|sgd|adagrad|rmsprop|adafactor|optimi[sz]er)'. In the rank's GPU operations
--   ordered by (start_ns, end_ns, correlation_id), a burst is a maximal run of consecutive marker
--   kernels; E_i = running max of the burst ends. Step i's window is [E_{i-1}, E_i); step 0 starts
--   at the rank's first GPU operation. Operations after the last burst (an incomplete step) are in
--   the whole-capture window only. Detection needs at least 2 bursts and is not tried on ranks
--   that have NVTX ranges matching the step pattern.
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
cand AS (
    SELECT rank, start_ns, end_ns, correlation_id,
           op = 'kernel' AND name IN (SELECT name FROM marker_names) AS marker
    FROM undetermined
    WHERE rank IN (SELECT rank FROM undetermined WHERE op = 'kernel' AND name IN (SELECT name FROM marker_names))
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
           o.e AS end_ns
    FROM ordered AS o
    JOIN (SELECT rank, min(start_ns) AS start_ns FROM cand GROUP BY rank) AS c USING (rank)
    WHERE o.n_bursts >= 2
)
SELECT rank, step, start_ns::BIGINT AS start_ns, end_ns::BIGINT AS end_ns
FROM windows
WHERE end_ns > start_ns;
