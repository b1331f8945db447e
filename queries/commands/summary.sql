-- The statements of the `summary` command's step options (nsight_analyze/commands/summary.py).

-- name: pattern_check
-- Whether RE2 accepts the --step-pattern (?); an error says why not.
SELECT regexp_matches('', ?)

-- name: store_step_pattern
-- The step pattern (key, regex) in settings, replacing the one stored.
INSERT INTO settings VALUES (?, ?, 'regex: NVTX ranges that delimit training steps')
ON CONFLICT (key) DO UPDATE SET value = excluded.value

-- name: nvtx_matches
-- Whether any NVTX range (with an end) matches the pattern $$p (a named parameter), as
-- _tp_nvtx_step_ranges reads them.
SELECT EXISTS (SELECT 1 FROM nvtx WHERE end_ns IS NOT NULL AND start_ns IS NOT NULL
AND text IS NOT NULL AND regexp_matches(text, $$p))

-- name: store_periodic_steps
-- settings.periodic_steps ('on' | 'off': ?), replacing the value stored.
INSERT INTO settings VALUES ('periodic_steps', ?, 'on: steps from a kernel that runs once per step')
ON CONFLICT (key) DO UPDATE SET value = excluded.value
