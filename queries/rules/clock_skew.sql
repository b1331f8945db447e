-- The statements of the `clock-skew` capture finding (nsight_analyze/rules/clock_skew.py).

-- name: skewed_ranks
-- The ranks whose clock was corrected by at least $th_ns (clock_skew_min_us in ns).
SELECT rank, host, correction_ns FROM merge_rank_clock WHERE abs(correction_ns) >= $th_ns ORDER BY rank

-- name: alignment_per_host
SELECT * FROM alignment_quality ORDER BY host

-- name: corrected_ranks
-- The skewed ranks ($th_ns) with their session-start offset, clock offset and alignment method.
SELECT rank, host, session_offset_ns, clock_offset_ns, correction_ns, alignment_method
FROM merge_rank_clock WHERE abs(correction_ns) >= $th_ns ORDER BY rank

-- name: max_residual_p95
SELECT max(residual_p95_ns) FROM alignment_quality

-- name: skewed_hosts_corrected
-- Whether every host holding a skewed rank ($th_ns) was aligned on the collectives' end times.
SELECT bool_and(method = 'collectives') FROM alignment_quality
WHERE host IN (SELECT host FROM merge_rank_clock WHERE abs(correction_ns) >= $th_ns)
