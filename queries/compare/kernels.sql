-- The statements of compare's kernels and collectives (nsight_analyze/compare/kernels.py).

-- name: keep_stratum_value
-- One value per stratum (sk) of a key or stratum column ($col).
any_value($col) AS $col

-- name: stored_counts_same
-- Counted rows (sk, v, w = instances) of one source read for both sides (a workspace against
-- itself).
SELECT sk, v, sum(w)::BIGINT AS cx, sum(w)::BIGINT AS cy FROM ($before) GROUP BY sk, v

-- name: stored_counts_both
-- Counted rows of both sides: per stratum key and duration, BEFORE's (cx) and AFTER's (cy)
-- instances.
SELECT sk, v, coalesce(sum(w) FILTER (WHERE side = 0), 0)::BIGINT AS cx,
       coalesce(sum(w) FILTER (WHERE side = 1), 0)::BIGINT AS cy
FROM (SELECT 0 AS side, * FROM ($before)
      UNION ALL SELECT 1 AS side, * FROM ($after)) GROUP BY sk, v

-- name: side_strata
-- One side's strata ($columns: the key and stratum columns) by their key, from its kinds.
SELECT sk, $columns FROM ($kinds)

-- name: stored_strata
-- The strata of the sides' kinds ($names: side_strata, UNIONed).
SELECT DISTINCT sk, $columns FROM ($names)

-- name: instance_counts_same
-- The instances of one source read for both sides, counted per stratum (a hash of its columns:
-- grouping and partitioning on long kernel names is what costs) and duration.
SELECT hash($columns) AS sk, v, count(*) AS cx, count(*) AS cy, $keep
FROM ($before) GROUP BY sk, v

-- name: instance_counts_both
-- The instances of both sides, counted per stratum and duration.
SELECT hash($columns) AS sk, v, count(*) FILTER (WHERE side = 0) AS cx,
       count(*) FILTER (WHERE side = 1) AS cy, $keep
FROM (SELECT 0 AS side, * FROM ($before)
      UNION ALL SELECT 1 AS side, * FROM ($after)) GROUP BY sk, v

-- name: counted_strata
SELECT DISTINCT sk, $columns FROM _cmp_g

-- name: store_counts
-- Strata are keyed by a hash (grouping and partitioning on long kernel names is what costs).
CREATE OR REPLACE TEMP TABLE _cmp_g AS $counts

-- name: stored_count_rows
SELECT sk, v, cx, cy FROM _cmp_g

-- name: count_rows
-- A NULL duration (an instance without an end) has no rank: left out, as its median was.
SELECT sk, v, cx, cy FROM ($counts) WHERE v IS NOT NULL ORDER BY sk, v

-- name: key_tests
-- Temp table $table: per key ($keys), its strata (_cmp_strata_stats: numpy's per-stratum
-- counts, rank sums, ties and medians) present in both runs combined by van Elteren's test
-- (weights 1 / (n + 1)). The strata's terms are summed in DECIMAL: a sum of DOUBLEs depends on
-- the order its terms arrive in (parallel aggregation), and p-values and changes then moved in
-- the last digits between two comparisons of the same runs. 18 places keep the smallest terms
-- (1/(n+1) weights) to 1e-12 relative; the largest (before's time per stratum, ns) stay far
-- below 10^20. `rel` sums with CASE: a FILTER would cast inf.
CREATE OR REPLACE TEMP TABLE $table AS
WITH strata AS ($strata),
y AS (SELECT st.*, s.* EXCLUDE (sk), (s.nx + s.ny)::DOUBLE AS n, 1.0 / (s.nx + s.ny + 1) AS w,
             s.ra - s.ny * (s.ny + 1) / 2.0 - s.nx * s.ny / 2.0 AS du
      FROM _cmp_strata_stats s JOIN strata st USING (sk) WHERE s.nx > 0 AND s.ny > 0)
SELECT $keys, count(*) AS configs, sum((w * du)::DECIMAL(38, 18))::DOUBLE AS stat,
       sum((w * w * nx * ny / 12.0 * ((n + 1) - tie / (n * (n - 1))))::DECIMAL(38, 18))::DOUBLE AS var,
       0.5 * min(w) AS cc,
       (sum(CASE WHEN mb > 0 THEN (tb * (ma / mb - 1))::DECIMAL(38, 18) END)
           / nullif(sum(CASE WHEN mb > 0 THEN tb::DECIMAL(38, 18) END), 0))::DOUBLE AS rel
FROM y GROUP BY $keys

-- name: drop_counts
DROP TABLE IF EXISTS _cmp_g

-- name: kind_key_counts
-- The distinct kinds of $cat's kernel_kinds and their distinct keys: equal when no two kinds
-- share a key.
SELECT count(DISTINCT (kind, name, category, $config)), count(DISTINCT kind)
FROM $cat.kernel_kinds

-- name: duration_tables_probe
-- Fails when $cat stores no kernel_duration_counts or kernel_duration_totals.
SELECT 1 FROM $cat.kernel_duration_counts, $cat.kernel_duration_totals LIMIT 0

-- name: on_common_ranks
-- A side's per-rank rows on the common ranks.
rank IN (SELECT rank FROM cmp_common)

-- name: on_every_rank
-- A side whose every rank is common: no filter.
true

-- name: stored_kinds
-- The stored kinds of $cat on the ranks $common keeps, with their stratum key.
SELECT rank, kind, hash(name, $config) AS sk, name, category, $config, instances, total_ns
FROM $cat.kernel_kinds WHERE $common

-- name: stored_name_totals
-- Per name: its instances and time, and the most frequent category of its instances (as
-- mode(category) over them), from the stored kinds ($kinds).
SELECT name, arg_max(category, c) FILTER (WHERE category IS NOT NULL) AS category,
       sum(c)::BIGINT AS n, sum(t) AS t
FROM (SELECT name, category, sum(instances) AS c, sum(total_ns) AS t FROM ($kinds)
      GROUP BY name, category) GROUP BY name

-- name: job_duration_counts
-- Every rank of a side common: the job's instances per kind and duration, summed at analysis
-- time.
SELECT kind, duration_ns::DOUBLE AS v, instances AS w FROM $cat.kernel_duration_totals

-- name: rank_duration_counts
-- The instances per kind and duration over the common ranks.
SELECT kind, duration_ns::DOUBLE AS v, sum(instances) AS w
FROM $cat.kernel_duration_counts WHERE $common GROUP BY kind, duration_ns

-- name: stratum_duration_counts
-- Counted over the ranks by kind (an integer) first ($counted), then keyed by stratum: few rows
-- to join.
SELECT m.sk, d.v, d.w FROM ($counted) d
JOIN (SELECT DISTINCT kind, sk FROM ($kinds)) m USING (kind)

-- name: kernel_name_totals
-- A workspace analysed before the stored kinds existed: per name, from every kernel.
SELECT name, mode(category) AS category, count(*) AS n, sum(end_ns - start_ns) AS t
FROM $cat.kernels WHERE $common GROUP BY name

-- name: kernel_durations
SELECT name, $config, (end_ns - start_ns)::DOUBLE AS v FROM $cat.kernels WHERE $common

-- name: same_as_before
-- AFTER's rows of a workspace against itself: BEFORE's.
SELECT * FROM b

-- name: kernel_diff
-- Kernels matched by name: instances, time and time per step ($before_steps, $after_steps) of
-- each side ($before, $after: per name), and the duration test (cmp_kdur).
WITH b AS MATERIALIZED ($before), a AS ($after),
j AS (
    SELECT coalesce(b.name, a.name) AS name, coalesce(a.category, b.category) AS category,
           coalesce(b.n, 0)::BIGINT AS before_instances, coalesce(a.n, 0)::BIGINT AS after_instances,
           coalesce(b.t, 0)::BIGINT AS before_ns, coalesce(a.t, 0)::BIGINT AS after_ns,
           b.t / b.n AS before_avg_ns, a.t / a.n AS after_avg_ns,
           b.name IS NULL AS added, a.name IS NULL AS removed
    FROM b FULL OUTER JOIN a ON a.name = b.name)
SELECT j.*, after_ns - before_ns AS delta_ns,
       before_ns / $before_steps AS before_per_step_ns, after_ns / $after_steps AS after_per_step_ns,
       after_ns / $after_steps - before_ns / $before_steps AS delta_per_step_ns,
       d.configs, d.stat, d.var, d.cc, d.rel
FROM j LEFT JOIN cmp_kdur d ON d.name = j.name

-- name: collective_step_times
-- Per (op, bytes) of $cat: its NCCL kernel time in each step window of the common ranks
-- ($side_tp: the side's partition), 0 in a step without it, as a list ordered by step.
WITH st AS (SELECT DISTINCT step FROM ${side}_tp
            WHERE step IS NOT NULL AND rank IN (SELECT rank FROM cmp_common)),
k AS (SELECT k.op, k.bytes, s.step, sum(k.duration_ns) AS t
      FROM $cat.merge_nccl_kernels k JOIN $cat.steps s
        ON s.rank = k.rank AND k.start_ns >= s.start_ns AND k.start_ns < s.end_ns
      WHERE k.rank IN (SELECT rank FROM cmp_common) AND s.step IN (SELECT step FROM st)
      GROUP BY ALL),
keys AS (SELECT DISTINCT op, bytes FROM $cat.merge_nccl_kernels
         WHERE rank IN (SELECT rank FROM cmp_common))
SELECT keys.op, keys.bytes, list(coalesce(k.t, 0)::DOUBLE ORDER BY st.step)
FROM keys CROSS JOIN st LEFT JOIN k
  ON k.op IS NOT DISTINCT FROM keys.op AND k.bytes IS NOT DISTINCT FROM keys.bytes
     AND k.step = st.step
GROUP BY keys.op, keys.bytes

-- name: collective_kernel_totals
SELECT op, bytes, count(*) AS n, sum(duration_ns) AS t FROM $cat.merge_nccl_kernels
WHERE $common GROUP BY op, bytes

-- name: collective_arrivals
SELECT op, bytes, count(*) AS inst, avg(start_skew_ns) AS skew, median(transfer_ns) AS xfer
FROM $cat.collectives GROUP BY op, bytes

-- name: collective_side
-- One side's collectives: its kernel totals ($kernels) with their arrivals ($arrivals).
SELECT k.*, c.inst, c.skew, c.xfer FROM ($kernels) k LEFT JOIN ($arrivals) c
ON c.op = k.op AND c.bytes IS NOT DISTINCT FROM k.bytes

-- name: collective_durations
SELECT op, bytes, duration_ns::DOUBLE AS v FROM $cat.merge_nccl_kernels WHERE $common

-- name: collective_diff
-- Collectives matched by (op, bytes): kernels, instances, time, arrival skew, transfer time and
-- time per step of each side, and the duration test (cmp_cdur).
WITH b AS MATERIALIZED ($before), a AS ($after),
j AS (
    SELECT coalesce(b.op, a.op) AS op, coalesce(b.bytes, a.bytes) AS bytes,
           coalesce(b.n, 0)::BIGINT AS before_kernels, coalesce(a.n, 0)::BIGINT AS after_kernels,
           coalesce(b.inst, 0)::BIGINT AS before_instances,
           coalesce(a.inst, 0)::BIGINT AS after_instances,
           coalesce(b.t, 0)::BIGINT AS before_ns, coalesce(a.t, 0)::BIGINT AS after_ns,
           b.skew AS before_avg_skew_ns, a.skew AS after_avg_skew_ns,
           b.xfer AS before_median_transfer_ns, a.xfer AS after_median_transfer_ns,
           b.op IS NULL AS added, a.op IS NULL AS removed
    FROM b FULL OUTER JOIN a ON a.op = b.op AND a.bytes IS NOT DISTINCT FROM b.bytes)
SELECT j.*, after_ns - before_ns AS delta_ns,
       before_ns / $before_steps AS before_per_step_ns, after_ns / $after_steps AS after_per_step_ns,
       after_ns / $after_steps - before_ns / $before_steps AS delta_per_step_ns,
       d.configs, d.stat, d.var, d.cc, d.rel
FROM j LEFT JOIN cmp_cdur d ON d.op = j.op AND d.bytes IS NOT DISTINCT FROM j.bytes
