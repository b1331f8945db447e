-- The statements of the what-if bound of a rule's recoverable time (nsight_analyze/rules/_whatif.py).

-- name: whatif_gain
-- The scenario's ($scenario) whole-job gain: the largest over jobs, a bound for every job.
SELECT max(gain_ns) FROM whatif WHERE scenario = '$scenario' AND step IS NULL
