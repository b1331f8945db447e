-- longest_gaps: each rank's 15 longest idle gap pieces, with the step they fall in.
-- Why: the report's "longest gaps" table (the moments behind the idle numbers), reachable with
--   `nsight-analyze sql`; the job's 15 longest are among these.
-- Columns:
--   rank INTEGER
--   step BIGINT              the step window holding the piece (NULL: in no step window)
--   cause VARCHAR            see gaps
--   start_ns BIGINT ns, duration_ns BIGINT ns   the piece (rank's file time)
--   host_activity VARCHAR    see gaps
-- Definition: gaps of the whole-capture window (step IS NULL), the 15 longest per rank (ties by
--   start); the step is that of the same piece in a step window (gaps repeats pieces per window).
-- columns: rank, step, cause, start_ns, duration_ns, host_activity
-- stage: rank
-- result: stored
-- requires: gaps
CREATE OR REPLACE VIEW longest_gaps AS
WITH top AS (
    SELECT * FROM gaps WHERE step IS NULL
    QUALIFY row_number() OVER (PARTITION BY rank ORDER BY duration_ns DESC, start_ns) <= 15
)
SELECT t.rank, (SELECT max(s.step) FROM gaps s WHERE s.step IS NOT NULL AND s.rank = t.rank
                AND s.start_ns = t.start_ns) AS step,
       t.cause, t.start_ns, t.duration_ns, t.host_activity
FROM top AS t;
