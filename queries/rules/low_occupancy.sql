-- The statements of the `low-occupancy` finding (nsight_analyze/rules/low_occupancy.py).

-- name: idle_sm_bound
-- A small-grid launch group's idle-SM bound, duration x (1 - blocks / SMs), rounded to 1e-9 ns as a
-- DECIMAL: DECIMAL sums are exact, a DOUBLE sum's last bits (and so the rounded evidence column)
-- depend on the order DuckDB's threads add the rows in.
CAST(duration_ns * (1 - blocks / sm) AS DECIMAL(38, 9))

-- name: small_grid_groups
-- launches grouped by grid size per window (diag_kernel_grids, stored), in diag_windows' windows,
-- with fewer blocks than the rank's SMs ($sm_default: sm_count_default, 0 for none): the rows `k`
-- of the statements below.
SELECT d.rank, d.step, d.window_ns, d.name, d.blocks, d.launches,
       d.total_ns AS duration_ns, coalesce(d.sm_count, nullif($sm_default, 0)) AS sm
FROM diag_kernel_grids d JOIN diag_window_bounds w
  ON w.rank = d.rank AND w.step IS NOT DISTINCT FROM d.step
WHERE coalesce(d.sm_count, nullif($sm_default, 0)) > 0
  AND d.blocks < coalesce(d.sm_count, nullif($sm_default, 0))

-- name: idle_sm_per_window
-- per window, capped at the window: kernels on several streams can overlap; each row's bound
-- ($idle_sm: idle_sm_bound) as an exact decimal, so that the sum does not depend on the order
-- DuckDB's threads add in; $groups: small_grid_groups.
WITH k AS ($groups) SELECT rank, step, max(window_ns) AS window_ns,
                           least(sum($idle_sm), max(window_ns)) AS t
FROM k GROUP BY rank, step

-- name: idle_sm_per_rank
-- Each rank's idle-SM bound summed over its windows ($per_window: idle_sm_per_window).
SELECT rank, sum(t) AS bound FROM ($per_window) GROUP BY rank

-- name: small_grid_kernels
-- Kernels with fewer blocks than SMs, by idle-SM time bound (duration x (1 - blocks / SMs));
-- $groups: small_grid_groups, $idle_sm: idle_sm_bound.
WITH k AS ($groups) SELECT name, sum(launches)::BIGINT AS launches, min(blocks) AS min_blocks,
                           max(blocks) AS max_blocks,
                           max(sm) AS sm_count, sum(duration_ns) AS total_ns,
                           CAST(sum($idle_sm) AS BIGINT) AS idle_sm_bound_ns,
                           list(DISTINCT rank ORDER BY rank) AS ranks
FROM k GROUP BY name ORDER BY idle_sm_bound_ns DESC, name

-- name: small_grid_launches
-- The small-grid launches of low-occupancy, one row per kernel (rank, correlation_id, name,
-- duration_ns): fewer blocks than the rank's SMs (or $sm_default), not comms, starting inside a
-- diag_windows window (diag_kernel_grids' definition, per launch).
SELECT k.rank, k.correlation_id, k.name, k.duration_ns FROM kernels k
LEFT JOIN (SELECT rank, max(sm_count) AS sm FROM gpus GROUP BY rank) g ON g.rank = k.rank
WHERE k.category IS DISTINCT FROM 'comms' AND k.grid_x IS NOT NULL
  AND CAST(k.grid_x AS BIGINT) * k.grid_y * k.grid_z < coalesce(g.sm, nullif($sm_default, 0))
  AND EXISTS (SELECT 1 FROM diag_window_bounds w WHERE w.rank = k.rank
              AND k.start_ns >= w.start_ns AND k.start_ns < w.end_ns)
