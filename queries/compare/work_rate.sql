-- The statements of compare's work rate (nsight_analyze/compare/work_rate.py).
--
-- Every sum of fractional values is taken in DECIMAL(38, 9): a sum of DOUBLEs depends on the
-- order its terms arrive in, which parallel aggregation does not fix, so the same two runs
-- compared twice gave rates apart in the last digits.

-- name: instance_share
-- The share of a kernel instance inside [$lo, $hi) (a zero-length one counts by its start).
CASE WHEN end_ns > start_ns THEN greatest(least(end_ns, $hi) - greatest(start_ns, $lo), 0)::DOUBLE
     / (end_ns - start_ns) ELSE (start_ns >= $lo AND start_ns < $hi)::DOUBLE END

-- name: kind_key
-- A kind's key: its name ($name_col) and launch configuration ($config) hashed.
hash($name_col, $config)

-- name: share_total
coalesce(sum($col), 0) AS $col

-- name: counted_kinds
-- Per rank and kind of side $side ($kind_key) of $cat, its non-communication instances in the
-- rank's window `w`, their durations and their summed shares of the window and of each cut
-- ($share_totals): counted for the instances of positive length inside the innermost cut
-- ($inner: shares 1 and 0s), per instance ($window_share, $edge: instance_share) for the others.
SELECT $side AS side, rank, kk, sum(n) AS n, sum(dur_sum) AS dur_sum, sum(dur_ov) AS dur_ov,
       $share_totals
FROM (SELECT k.rank, $kind_key AS kk, count(*) AS n, sum((k.end_ns - k.start_ns)) AS dur_sum,
             sum((k.end_ns - k.start_ns)) AS dur_ov, count(*)::DOUBLE AS ov
      FROM $cat.kernels k JOIN w ON w.side = $side AND w.rank = k.rank
      WHERE k.end_ns >= w.lo AND k.start_ns < w.hi AND k.category IS DISTINCT FROM 'comms'
        AND k.end_ns > k.start_ns AND $inner GROUP BY ALL
      UNION ALL BY NAME
      SELECT k.rank, $kind_key AS kk, count(*) AS n, sum((k.end_ns - k.start_ns)) AS dur_sum,
             sum(((k.end_ns - k.start_ns) * $window_share)::DECIMAL(38, 9))::DOUBLE AS dur_ov, $edge
      FROM $cat.kernels k JOIN w ON w.side = $side AND w.rank = k.rank
      WHERE k.end_ns >= w.lo AND k.start_ns < w.hi AND k.category IS DISTINCT FROM 'comms'
        AND NOT (k.end_ns > k.start_ns AND $inner) GROUP BY ALL)
GROUP BY rank, kk

-- name: stored_trims
-- The trim levels and fractions $cat's kernel_window_shares holds.
SELECT DISTINCT trim_level, trim_frac FROM $cat.kernel_window_shares

-- name: stored_cut_shares
-- A kind's stored shares of the front and back cut at trim level $i.
max(front_share) FILTER (WHERE trim_level = $i) AS f$i,
max(back_share) FILTER (WHERE trim_level = $i) AS b$i

-- name: summed_share
sum($col) AS $col

-- name: stored_kinds
-- The rows of counted_kinds for side $side (its columns in its order: they are UNIONed
-- positionally), read from $cat's stored kernel_window_shares (one row per rank, kind and trim
-- level; the shares summed there once per rank at analysis time): $cuts, stored_cut_shares per
-- level; $summed_cuts, their sums per kind key ($kind_key).
SELECT $side AS side, rank, $kind_key AS kk, sum(n) AS n, sum(dur_sum) AS dur_sum, sum(dur_ov) AS dur_ov,
       sum(ov) AS ov, $summed_cuts
FROM (SELECT rank, name, $config, any_value(instances) AS n,
             any_value(total_ns) AS dur_sum, any_value(span_ns) AS dur_ov,
             any_value(span_share) AS ov, $cuts
      FROM $cat.kernel_window_shares WHERE rank IN (SELECT rank FROM cmp_common)
      GROUP BY rank, name, $config)
GROUP BY rank, kk

-- name: trim_fractions
-- The trim levels i and their fractions f: 0 .. $trim in $levels levels.
SELECT i, $trim * i / $last_level AS f FROM range($levels) r(i)

-- name: cut_points
-- A rank's cut points at trim level $i ($frac: the level's fraction as DuckDB computed it,
-- written back as an exact DOUBLE literal).
lo + (hi - lo) * $frac::DOUBLE AS cf$i, hi - (hi - lo) * $frac::DOUBLE AS cb$i

-- name: trim_case
-- A kind's share of the cut at the trim level tr.i ($whens: trim_when per level).
CASE tr.i $whens END

-- name: trim_when
WHEN $i THEN $x$i

-- name: side_rows
SELECT * FROM a0

-- name: both_sides_from_one
-- A workspace against itself: its kernels read once, as both sides ($shares: the share columns).
SELECT * FROM a0 UNION ALL SELECT 1 AS side, rank, kk, n, dur_sum, dur_ov, $shares FROM a0

-- name: inside_innermost_cut
-- An instance inside the innermost cut (trim level $last).
k.start_ns >= w.cf$last AND k.end_ns <= w.cb$last

-- name: inside_window
k.start_ns >= w.lo AND k.end_ns <= w.hi

-- name: edge_share
-- An instance's share ($share: instance_share) of a span, summed per kind as column $col.
sum(($share)::DECIMAL(38, 9))::DOUBLE AS $col

-- name: window_work
-- Per side, rank and kind (name and launch configuration; $kinds): the instances in the window,
-- their durations, and their summed shares of the window and of each cut (an instance's share of
-- a trimmed-off end is what the cut removes). BEFORE's mean duration of a kind values the
-- shares: sum(ref x share) over instances = ref x (summed shares) per kind. Per side, rank and
-- pair of trims ($trims; $cut_cols: the rank's cut points; $front_cut, $back_cut: a kind's
-- shares of the cuts), the window and the work in it.
CREATE OR REPLACE TEMP TABLE cmp_wr AS
WITH w AS (SELECT *, $cut_cols FROM (
           SELECT 0 AS side, * FROM before_win WHERE rank IN (SELECT rank FROM cmp_common)
           UNION ALL SELECT 1, * FROM after_win WHERE rank IN (SELECT rank FROM cmp_common))),
a0 AS MATERIALIZED ($kinds),
agg AS MATERIALIZED ($both),
ref AS MATERIALIZED (SELECT kk, sum(dur_sum) / sum(n) AS ref_ns FROM agg WHERE side = 0 GROUP BY kk
        HAVING kk IN (SELECT kk FROM agg WHERE side = 1)),
tr AS ($trims),
whole AS (SELECT side, rank, sum((ref_ns * ov)::DECIMAL(38, 9)) AS work,
                 sum(dur_ov::DECIMAL(38, 9)) AS matched_ns
          FROM agg JOIN ref USING (kk) GROUP BY side, rank),
tot AS (SELECT side, rank, sum(dur_ov::DECIMAL(38, 9)) AS kernel_ns FROM agg GROUP BY side, rank),
front AS (SELECT side, rank, tr.i, sum((ref_ns * $front_cut)::DECIMAL(38, 9)) AS cut
          FROM agg JOIN ref USING (kk) JOIN tr ON tr.i > 0 GROUP BY side, rank, tr.i),
back AS (SELECT side, rank, tr.i, sum((ref_ns * $back_cut)::DECIMAL(38, 9)) AS cut
         FROM agg JOIN ref USING (kk) JOIN tr ON tr.i > 0 GROUP BY side, rank, tr.i),
g AS (SELECT w.side, w.rank, a.i AS fi, b.i AS bi,
             ((w.hi - w.lo) * (1 - a.f - b.f))::DECIMAL(38, 9) AS window_ns
      FROM w, tr a, tr b)
SELECT g.*, coalesce(whole.work, 0) - coalesce(fc.cut, 0) - coalesce(bc.cut, 0) AS work_ns,
       coalesce(whole.matched_ns, 0) AS matched_ns, coalesce(tot.kernel_ns, 0) AS kernel_ns
FROM g LEFT JOIN whole ON whole.side = g.side AND whole.rank = g.rank
LEFT JOIN tot ON tot.side = g.side AND tot.rank = g.rank
LEFT JOIN front fc ON fc.side = g.side AND fc.rank = g.rank AND fc.i = g.fi
LEFT JOIN back bc ON bc.side = g.side AND bc.rank = g.rank AND bc.i = g.bi

-- name: cut_rates
-- Per side and pair of trims: the work rate over the common ranks.
SELECT side, fi, bi, sum(work_ns) / nullif(sum(window_ns), 0) AS rate
FROM cmp_wr GROUP BY side, fi, bi

-- name: whole_window_rows
-- Per side and rank: its untrimmed window, work, matched and kernel time.
SELECT side, rank, window_ns, work_ns, matched_ns, kernel_ns FROM cmp_wr
WHERE fi = 0 AND bi = 0 ORDER BY side, rank

-- name: busy_share
-- Side $i's busy share of its windows on the common ranks ($side_tp: its partition), over its
-- steps, or the whole capture on a rank without steps.
SELECT $i AS side, 100.0 * sum(compute_ns + memory_ns + other_ns) / nullif(sum(window_ns), 0)
AS busy_pct FROM ${side}_tp t WHERE rank IN (SELECT rank FROM cmp_common) AND (step IS NOT NULL
OR NOT EXISTS (SELECT 1 FROM ${side}_tp u WHERE u.rank = t.rank AND u.step IS NOT NULL))
