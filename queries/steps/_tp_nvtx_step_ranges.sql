-- _tp_nvtx_step_ranges: NVTX ranges that delimit training steps, with their step number.
-- Why: steps are user-visible NVTX ranges (ProfilerStep#N, train_step, ...); the pattern lives
-- in settings('step_pattern') so users can change it without editing SQL.
-- Columns: rank INTEGER, tid BIGINT, start_ns BIGINT ns, end_ns BIGINT ns, text VARCHAR,
--   step BIGINT (trailing integer of the text, else the range's 0-based ordinal among the
--   rank's matching ranges ordered by start_ns, end_ns, tid).
-- Definition: ranges (marks and ranges without an end excluded) on any thread of the rank whose
--   text matches the step_pattern regex (RE2 syntax, e.g. '(?i)^(ProfilerStep#\d+|step)\b').
--   Speed: a regex read from a table is compiled once per row (~30 us); when the session variable
--   step_pattern equals the setting (nsight_analyze.summary.prepare sets it) the constant regex
--   is used instead. The result is the same either way.
-- stage: rank
-- result: view
-- requires: nvtx, settings
CREATE OR REPLACE VIEW _tp_nvtx_step_ranges AS
WITH m AS (
    SELECT n.rank, n.tid, n.start_ns, n.end_ns, n.text
    FROM nvtx AS n
    WHERE n.end_ns IS NOT NULL AND n.start_ns IS NOT NULL AND n.end_ns >= n.start_ns
      AND n.text IS NOT NULL
      AND CASE WHEN getvariable('step_pattern') = (SELECT value FROM settings WHERE key = 'step_pattern')
               THEN regexp_matches(n.text, getvariable('step_pattern'))
               ELSE regexp_matches(n.text, (SELECT value FROM settings WHERE key = 'step_pattern')) END
)
SELECT
    rank, tid, start_ns, end_ns, text,
    coalesce(
        TRY_CAST(regexp_extract(text, '(\d+)$', 1) AS BIGINT),
        row_number() OVER (PARTITION BY rank ORDER BY start_ns, end_ns, tid) - 1
    ) AS step
FROM m;
