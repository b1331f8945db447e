-- kernel_window_shares: per rank and kind of kernel (name and launch configuration), its instances
--   in the rank's step windows and their summed shares of that span and of its trimmed-off ends.
-- Why: compare's work per unit of time (compare/work_rate.py, docs/compare.md "Without steps")
--   values each instance's share of the window, and of sub-windows cut 0..10 % shorter at either
--   end, at BEFORE's mean duration of its kind. Those shares depend on one rank's kernels and
--   steps only, so they are summed here once per rank (a few rows per kind) instead of clipping
--   every kernel of both runs at each compare.
-- Columns: rank INTEGER, name VARCHAR (kernel name), grid_x, grid_y, grid_z, block_x, block_y,
--   block_z INTEGER (the launch configuration; a kind is name + configuration),
--   instances BIGINT (non-communication instances overlapping the span), total_ns BIGINT ns (their
--   summed durations), span_ns DOUBLE ns (summed duration inside the span), span_share DOUBLE
--   (summed share inside the span), trim_level INTEGER (1..4), trim_frac DOUBLE (the fraction of the
--   span cut at each end at this level: 0.1 x trim_level / 4), front_share DOUBLE and back_share
--   DOUBLE (summed share inside the first / last trim_frac of the span); instances .. span_share
--   repeat on the four trim_level rows of a kind.
-- Definition: span = [min start_ns, max end_ns) of the rank's `steps` (the capture when it has no
--   steps); kernels of category other than 'comms' with end_ns >= span start and start_ns < span
--   end. An instance's share of [s, e) is its overlap with [s, e) / its duration; a zero-length
--   instance counts 1 when it starts in [s, e). The cut points are span start + length x frac and
--   span end - length x frac (DOUBLE). The trim levels are compare's defaults (rate_trim_pct 10,
--   5 levels with 0): compare reads this table when its settings give the same fractions, and
--   clips the kernels itself otherwise.
-- columns: rank, name, grid_x, grid_y, grid_z, block_x, block_y, block_z, instances, total_ns, span_ns, span_share, trim_level, trim_frac, front_share, back_share
-- stage: rank
-- result: stored
-- requires: kernels, steps
CREATE OR REPLACE VIEW kernel_window_shares AS
-- the fractions as compare computes them (0.1 * i / 4 over range(5)), so its check is exact
WITH tr AS (SELECT i, 0.1 * i / 4 AS f FROM range(5) AS r(i)),
fr AS (
    SELECT max(f) FILTER (WHERE i = 1)::DOUBLE AS f1, max(f) FILTER (WHERE i = 2)::DOUBLE AS f2,
           max(f) FILTER (WHERE i = 3)::DOUBLE AS f3, max(f) FILTER (WHERE i = 4)::DOUBLE AS f4
    FROM tr
),
w AS (
    SELECT s.rank, min(s.start_ns) AS lo, max(s.end_ns) AS hi, any_value(fr.f1) AS f1,
           any_value(fr.f2) AS f2, any_value(fr.f3) AS f3, any_value(fr.f4) AS f4
    FROM steps AS s, fr GROUP BY s.rank
),
c AS (
    SELECT *, lo + (hi - lo) * f1 AS cf1, hi - (hi - lo) * f1 AS cb1,
           lo + (hi - lo) * f2 AS cf2, hi - (hi - lo) * f2 AS cb2,
           lo + (hi - lo) * f3 AS cf3, hi - (hi - lo) * f3 AS cb3,
           lo + (hi - lo) * f4 AS cf4, hi - (hi - lo) * f4 AS cb4
    FROM w
),
k AS NOT MATERIALIZED (  -- scanned twice: a second scan and join cost less than storing its names
    SELECT k.rank, k.name, k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z,
           k.start_ns, k.end_ns, k.end_ns - k.start_ns AS d, c.* EXCLUDE (rank)
    FROM kernels AS k JOIN c ON c.rank = k.rank
    WHERE k.end_ns >= c.lo AND k.start_ns < c.hi AND k.category IS DISTINCT FROM 'comms'
),
-- an instance of positive length inside the innermost cut lies wholly in the span and in no
-- trimmed-off end (shares 1 and 0s): those, most instances, are only counted
parts AS (
    SELECT rank, name, grid_x, grid_y, grid_z, block_x, block_y, block_z, count(*) AS n,
           sum(d) AS total_ns, sum(d)::DOUBLE AS span_ns, count(*)::DOUBLE AS span_share,
           0.0::DOUBLE AS f1, 0.0::DOUBLE AS f2, 0.0::DOUBLE AS f3, 0.0::DOUBLE AS f4,
           0.0::DOUBLE AS b1, 0.0::DOUBLE AS b2, 0.0::DOUBLE AS b3, 0.0::DOUBLE AS b4
    FROM k WHERE end_ns > start_ns AND start_ns >= cf4 AND end_ns <= cb4
    GROUP BY ALL
    UNION ALL BY NAME
    SELECT rank, name, grid_x, grid_y, grid_z, block_x, block_y, block_z, count(*) AS n,
           sum(d) AS total_ns, sum(d * CASE WHEN d > 0 THEN greatest(least(end_ns, hi) - greatest(start_ns, lo), 0)::DOUBLE / d
                    ELSE (start_ns >= lo AND start_ns < hi)::DOUBLE END) AS span_ns,
           sum(CASE WHEN d > 0 THEN greatest(least(end_ns, hi) - greatest(start_ns, lo), 0)::DOUBLE / d
                    ELSE (start_ns >= lo AND start_ns < hi)::DOUBLE END) AS span_share,
           sum(CASE WHEN d > 0 THEN greatest(least(end_ns, cf1) - greatest(start_ns, lo), 0)::DOUBLE / d
                    ELSE (start_ns >= lo AND start_ns < cf1)::DOUBLE END) AS f1,
           sum(CASE WHEN d > 0 THEN greatest(least(end_ns, cf2) - greatest(start_ns, lo), 0)::DOUBLE / d
                    ELSE (start_ns >= lo AND start_ns < cf2)::DOUBLE END) AS f2,
           sum(CASE WHEN d > 0 THEN greatest(least(end_ns, cf3) - greatest(start_ns, lo), 0)::DOUBLE / d
                    ELSE (start_ns >= lo AND start_ns < cf3)::DOUBLE END) AS f3,
           sum(CASE WHEN d > 0 THEN greatest(least(end_ns, cf4) - greatest(start_ns, lo), 0)::DOUBLE / d
                    ELSE (start_ns >= lo AND start_ns < cf4)::DOUBLE END) AS f4,
           sum(CASE WHEN d > 0 THEN greatest(least(end_ns, hi) - greatest(start_ns, cb1), 0)::DOUBLE / d
                    ELSE (start_ns >= cb1 AND start_ns < hi)::DOUBLE END) AS b1,
           sum(CASE WHEN d > 0 THEN greatest(least(end_ns, hi) - greatest(start_ns, cb2), 0)::DOUBLE / d
                    ELSE (start_ns >= cb2 AND start_ns < hi)::DOUBLE END) AS b2,
           sum(CASE WHEN d > 0 THEN greatest(least(end_ns, hi) - greatest(start_ns, cb3), 0)::DOUBLE / d
                    ELSE (start_ns >= cb3 AND start_ns < hi)::DOUBLE END) AS b3,
           sum(CASE WHEN d > 0 THEN greatest(least(end_ns, hi) - greatest(start_ns, cb4), 0)::DOUBLE / d
                    ELSE (start_ns >= cb4 AND start_ns < hi)::DOUBLE END) AS b4
    FROM k WHERE NOT (end_ns > start_ns AND start_ns >= cf4 AND end_ns <= cb4)
    GROUP BY ALL
),
kinds AS (
    SELECT rank, name, grid_x, grid_y, grid_z, block_x, block_y, block_z, sum(n)::BIGINT AS instances,
           sum(total_ns)::BIGINT AS total_ns, sum(span_ns) AS span_ns, sum(span_share) AS span_share,
           sum(f1) AS f1, sum(f2) AS f2, sum(f3) AS f3, sum(f4) AS f4,
           sum(b1) AS b1, sum(b2) AS b2, sum(b3) AS b3, sum(b4) AS b4
    FROM parts GROUP BY ALL
)
SELECT rank, name, grid_x, grid_y, grid_z, block_x, block_y, block_z, instances, total_ns, span_ns,
       span_share, lv.trim_level, lv.trim_frac, lv.front_share, lv.back_share
FROM kinds, fr,
     LATERAL (VALUES (1, fr.f1, kinds.f1, kinds.b1), (2, fr.f2, kinds.f2, kinds.b2),
                     (3, fr.f3, kinds.f3, kinds.b3), (4, fr.f4, kinds.f4, kinds.b4))
         AS lv(trim_level, trim_frac, front_share, back_share);
