-- cupti_range_joins: each CUPTI range-profiler kernel placed on a kernel of the same rank, or why not.
-- Purpose: the range profiler replays and serialises each kernel, so its ranges carry counters but
--   not the kernel's unperturbed time; the kernels of the same run (the trace's `kernels`, when the
--   profiler also recorded CUDA activities) carry the time. The n-th range of a name is joined to the
--   n-th kernel of that name on the rank (kernels in start order), so every counted FLOP lands on one
--   timeline kernel and none twice. Rows that cannot be joined say why (status), never dropped.
-- Columns:
--   rank, range_id, name    the range (kineto_profiler_ranges)
--   occurrence              0-based position of the range among the rank's ranges of that name
--   correlation_id, start_ns, end_ns   the joined kernel (NULL when not joined)
--   status   'joined' | 'no kernel events in the trace' | 'no kernel name (__missing__)' |
--            'no kernel of this name' | 'more ranges than kernels of this name'
-- columns: rank, range_id, name, occurrence, correlation_id, start_ns, end_ns, status
-- stage: live
-- requires: kineto_profiler_ranges, kernels
CREATE OR REPLACE VIEW cupti_range_joins AS
WITH p AS (
    SELECT rank, range_id, name,
        row_number() OVER (PARTITION BY rank, name ORDER BY range_id) - 1 AS occurrence
    FROM kineto_profiler_ranges
),
k AS (
    SELECT rank, name, start_ns, end_ns, correlation_id,
        row_number() OVER (PARTITION BY rank, name ORDER BY start_ns, correlation_id) - 1 AS occurrence
    FROM kernels
    WHERE rank IN (SELECT rank FROM p) AND name IN (SELECT name FROM p)
),
named AS (SELECT rank, name, count(*) AS n FROM k GROUP BY ALL),
per_rank AS (
    SELECT rank, count(*) AS n FROM kernels WHERE rank IN (SELECT rank FROM p) GROUP BY rank
)
SELECT p.rank, p.range_id, p.name, p.occurrence, k.correlation_id, k.start_ns, k.end_ns,
    CASE WHEN k.start_ns IS NOT NULL THEN 'joined'
         WHEN coalesce(r.n, 0) = 0 THEN 'no kernel events in the trace'
         WHEN p.name = '__missing__' THEN 'no kernel name (__missing__)'
         WHEN nm.n IS NULL THEN 'no kernel of this name'
         ELSE 'more ranges than kernels of this name' END AS status
FROM p
LEFT JOIN k ON k.rank = p.rank AND k.name = p.name AND k.occurrence = p.occurrence
LEFT JOIN named nm ON nm.rank = p.rank AND nm.name = p.name
LEFT JOIN per_rank r ON r.rank = p.rank;
