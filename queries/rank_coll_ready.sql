-- rank_coll_ready: per NCCL kernel, when the rank's own work let it start, and whether work waited for it.
-- Why: the what-if replay (whatif) needs, for each collective, the moment the rank was ready
-- apart from waiting for its NCCL stream (the end of the GPU work launched before it), and whether
-- the rank's next work had to wait for the collective to end (its GPU idled until then).
-- Columns: rank INTEGER, correlation_id BIGINT, start_ns BIGINT ns, end_ns BIGINT ns (the kernel,
--   file time), ready_ns BIGINT ns (file time; NULL when no earlier work is known),
--   resume_ns BIGINT ns (start of the first non-communication operation at or after end_ns; NULL if
--   none), waits BOOLEAN (work waited for it: resume_ns - end_ns <= 5 µs and no non-communication
--   operation was running at end_ns).
-- Definition: ready_ns = max end of the rank's non-communication GPU operations (gpu_ops) whose
--   correlation id is smaller than the NCCL kernel's (launched before it, CUPTI ids grow in launch
--   order); NCCL kernels are those of nccl_kernels.
-- columns: rank, correlation_id, start_ns, end_ns, ready_ns, resume_ns, waits
-- stage: rank
-- result: stored
-- requires: gpu_ops, nccl_kernels
CREATE OR REPLACE VIEW rank_coll_ready AS
WITH ops AS (
    SELECT rank, correlation_id, max(end_ns) AS e
    FROM gpu_ops
    WHERE category IS DISTINCT FROM 'comms' AND correlation_id IS NOT NULL
    GROUP BY rank, correlation_id
),
running AS (
    SELECT rank, correlation_id,
           max(e) OVER (PARTITION BY rank ORDER BY correlation_id ROWS UNBOUNDED PRECEDING) AS ready_ns
    FROM ops
),
by_start AS (
    SELECT rank, start_ns,
           max(end_ns) OVER (PARTITION BY rank ORDER BY start_ns ROWS UNBOUNDED PRECEDING) AS run_end
    FROM gpu_ops
    WHERE category IS DISTINCT FROM 'comms'
),
ready AS (
    SELECT n.rank, n.correlation_id, n.start_ns, n.end_ns, r.ready_ns
    FROM nccl_kernels AS n
    ASOF LEFT JOIN running AS r ON r.rank = n.rank AND n.correlation_id > r.correlation_id
),
busy AS (
    SELECT x.*, b.run_end
    FROM ready AS x
    ASOF LEFT JOIN by_start AS b ON b.rank = x.rank AND x.end_ns > b.start_ns
)
SELECT y.rank, y.correlation_id, y.start_ns, y.end_ns, y.ready_ns, nx.start_ns AS resume_ns,
       coalesce(nx.start_ns - y.end_ns <= 5000 AND coalesce(y.run_end, 0) <= y.end_ns, FALSE) AS waits
FROM busy AS y
ASOF LEFT JOIN by_start AS nx ON nx.rank = y.rank AND y.end_ns <= nx.start_ns;
