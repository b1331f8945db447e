-- The statements of compare's findings diff (nsight_analyze/compare/findings.py).

-- name: diagnose_windows
-- diagnose's windows of one side ($tp: e.g. before_tp): the steps, else the capture.
SELECT * FROM $tp WHERE CASE WHEN EXISTS (SELECT 1 FROM $tp WHERE step IS NOT NULL) THEN step IS NOT NULL ELSE step IS NULL END

-- name: cause_per_step
-- An idle cause's value ($measure: the cause's declared measure, rules/declare.py) as the rules
-- have it: the sum over steps of the worst rank's value / steps, over the windows $windows.
SELECT sum(m) / count(*) FROM (SELECT step, max($measure) AS m FROM ($windows) GROUP BY step)

-- name: memory_share
-- The memory share as rules/memory_bound.py has it: 100 x memory / busy time, over $windows.
SELECT 100.0 * sum(memory_ns) / nullif(sum(window_ns - idle_ns), 0) FROM ($windows)

-- name: dominant_share
-- The largest kernel name's share of kernel_summary time ($kernel_summary: the side's).
SELECT 100.0 * max(t) / nullif(sum(t), 0) FROM (
    SELECT name, sum(total_ns) AS t FROM $kernel_summary GROUP BY name)
