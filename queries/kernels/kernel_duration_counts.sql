-- kernel_duration_counts: per rank and kind of kernel, how many instances ran for each distinct
--   duration (a histogram at 1 ns resolution).
-- Why: compare's rank test of per-instance durations (compare/kernels.py `_duration_tests`)
--   needs every duration of both runs per launch configuration, but only as counts per distinct
--   value: ranks, ties and medians come from those counts. Counted here once per rank, compare
--   sums them over ranks instead of grouping every kernel of both runs at each comparison.
-- Columns: rank INTEGER, kind UBIGINT (kernel_kinds.kind: its name, category and launch
--   configuration), duration_ns BIGINT ns, instances BIGINT.
-- Definition: every kernel of the rank, duration = end_ns - start_ns; one row per rank, kind and
--   distinct duration.
-- columns: rank, kind, duration_ns, instances
-- stage: rank
-- result: stored
-- requires: kernels
CREATE OR REPLACE VIEW kernel_duration_counts AS
SELECT
    rank,
    hash(name, category, grid_x, grid_y, grid_z, block_x, block_y, block_z) AS kind,
    end_ns - start_ns AS duration_ns,
    count(*) AS instances
FROM kernels
GROUP BY ALL;
