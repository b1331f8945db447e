-- The statements of the helpers the rule modules share (nsight_analyze/rules/_common.py).

-- name: partial_jobs
-- The label of each job with ranks missing ("1 of 8 ranks"; jobs.complete), NULL when none.
SELECT string_agg(label, '; ' ORDER BY job) FROM jobs WHERE NOT complete
