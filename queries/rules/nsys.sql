-- The statements of the `gpu-starvation` and `gpu-low-utilisation` findings (nsight_analyze/rules/nsys.py).

-- name: overlapping
-- The join condition "same rank, overlapping in time" of aliases $a and $b, as the inequality
-- join queries/timeline/_rank_time.sql explains (a hash join on the rank tries every pair).
_rank_time($a.rank, $a.start_ns) < _rank_time($b.rank, $b.end_ns)
AND _rank_time($a.rank, $a.end_ns) > _rank_time($b.rank, $b.start_ns)

-- name: worst_rank_clipped
-- Worst rank's total overlap of the intervals ($intervals) with its diag windows, each overlap
-- weighted by $weight; $overlap: `overlapping` of i and w.
SELECT max(t) FROM (
  SELECT i.rank, sum((least(i.end_ns, w.end_ns) - greatest(i.start_ns, w.start_ns)) *
      $weight) AS t
  FROM ($intervals) i JOIN diag_window_bounds w ON $overlap
  GROUP BY i.rank)

-- name: interval_ranks
-- Every rank with an interval of $intervals (not only those of the evidence rows kept).
SELECT DISTINCT rank FROM ($intervals) ORDER BY rank

-- name: overlapping_steps
-- The steps whose diag windows the intervals ($intervals) overlap; $overlap: `overlapping` of i and w.
SELECT DISTINCT w.step FROM ($intervals) i JOIN diag_window_bounds w
ON $overlap ORDER BY 1

-- name: chunk_cause_mix
-- The idle time inside the intervals ($intervals, runs of whole chunks of the stored 30-chunk
-- grid) by cause, from the stored per-chunk causes.
SELECT c.cause, sum(c.idle_ns) AS ns
FROM diag_util_chunk_causes c JOIN ($intervals) s
  ON s.rank = c.rank AND s.device_id IS NOT DISTINCT FROM c.device_id
 AND c.c0 >= s.start_ns AND c.c1 <= s.end_ns
GROUP BY c.cause ORDER BY ns DESC, c.cause

-- name: gap_cause_mix
-- The idle time inside the intervals ($intervals) by cause, from the whole-capture gaps;
-- $overlap: `overlapping` of g and s.
SELECT g.cause, sum(least(g.end_ns, s.end_ns) - greatest(g.start_ns, s.start_ns)) AS ns
FROM (SELECT * FROM gaps WHERE step IS NULL) g
JOIN ($intervals) s ON $overlap
GROUP BY g.cause ORDER BY ns DESC, g.cause

-- name: steady_only
-- The intervals of $src (rank, start_ns, end_ns) less those that one-time phases (capture_phases)
-- span half of.
SELECT l.* FROM ($src) AS l
WHERE coalesce((SELECT sum(least(l.end_ns, p.end_ns) - greatest(l.start_ns, p.start_ns))
                FROM capture_phases AS p
                WHERE p.rank = l.rank AND p.start_ns < l.end_ns AND p.end_ns > l.start_ns),
               0) < 0.5 * (l.end_ns - l.start_ns)

-- name: starvation_gaps
-- GPU idle gaps longer than $gap_ms ms (nsys gpu-starv).
SELECT * FROM diag_gpu_starvation(min_gap_ms := $gap_ms)

-- name: starvation_evidence
-- The gaps of $src per rank and device, longest first.
SELECT rank, device_id, start_ns, end_ns, duration_ns FROM ($src)
ORDER BY duration_ns DESC, rank, start_ns

-- name: low_util_windows
-- Runs of the $chunks equal chunks of each rank's GPU span with in-use below $pct % (nsys gpu-low-util).
SELECT * FROM diag_low_util(chunks := $chunks, max_util_pct := $pct)

-- name: low_util_evidence
-- The windows of $src, lowest in-use first.
SELECT rank, device_id, start_ns, end_ns, duration_ns, chunks, in_use_pct FROM ($src)
ORDER BY in_use_pct, rank, start_ns

-- name: low_util_totals
-- The windows' ($src) total duration and lowest in-use.
SELECT sum(duration_ns) AS d, min(in_use_pct) AS m FROM ($src)
