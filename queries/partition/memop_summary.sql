-- memop_summary: per rank and copy kind, count, time and bytes of memcpy/memset operations
-- (nsys `gpumemtimesum` + `gpumemsizesum` parity).
-- Why: host<->device traffic and memsets are GPU time that is neither compute nor comms; their
-- sizes tell whether copies are many-small (latency bound) or few-large (bandwidth bound). Copies
-- that are communication (peer copies, NCCL copy-engine collectives) are listed, flagged comms.
-- Columns:
--   rank INTEGER, kind VARCHAR (memops.kind: HtoD, DtoH, DtoD, HtoH, PtoP, memset,
--   'Unified Memory HtoD', ...), instances BIGINT,
--   total_ns BIGINT ns, avg_ns DOUBLE ns, med_ns DOUBLE ns, min_ns BIGINT ns, max_ns BIGINT ns,
--   stddev_ns DOUBLE ns, total_bytes BIGINT B, avg_bytes DOUBLE B, med_bytes DOUBLE B,
--   min_bytes BIGINT B, max_bytes BIGINT B, stddev_bytes DOUBLE B,
--   pct DOUBLE % (share of the rank's summed memop time),
--   label VARCHAR (nsys' operation name: '[CUDA memcpy HtoD]', '[CUDA Unified Memory memcpy DtoH]',
--   '[CUDA memset]'),
--   comms BOOLEAN (the row's copies are communication, category comms in gpu_ops: kind PtoP, or
--   the copies of NCCL copy-engine collectives, nccl_ce_copies, not the user's memcpys; a rank with
--   both of one kind has two rows of it, one each way)
-- Definition: one row per rank, kind and comms; duration = end_ns - start_ns; med = ordinary median;
--   stddev = sample standard deviation (n - 1), 0 for a single operation; pct shares the time of
--   all the rank's memops, comms ones included. nsys prints sizes in MB = bytes / 10^6 (nsys has no
--   comms split: its row of a kind is the sum of ours).
-- columns: rank, kind, instances, total_ns, avg_ns, med_ns, min_ns, max_ns, stddev_ns, total_bytes, avg_bytes, med_bytes, min_bytes, max_bytes, stddev_bytes, pct, label, comms
-- stage: rank
-- result: stored
-- requires: memops, nccl_ce_copies
CREATE OR REPLACE VIEW memop_summary AS
WITH m AS (
    SELECT o.rank, coalesce(o.kind, 'Unknown') AS kind, o.end_ns - o.start_ns AS d, o.bytes,
           coalesce(o.kind = 'PtoP', false) OR ce.correlation_id IS NOT NULL AS comms
    FROM memops AS o
    LEFT JOIN (SELECT DISTINCT rank, correlation_id FROM nccl_ce_copies) AS ce
        ON ce.rank = o.rank AND ce.correlation_id = o.correlation_id
)
SELECT
    rank,
    kind,
    count(*) AS instances,
    CAST(sum(d) AS BIGINT) AS total_ns,
    avg(d) AS avg_ns,
    CAST(median(d) AS DOUBLE) AS med_ns,
    min(d) AS min_ns,
    max(d) AS max_ns,
    coalesce(stddev_samp(d), 0.0) AS stddev_ns,
    CAST(sum(bytes) AS BIGINT) AS total_bytes,
    avg(bytes) AS avg_bytes,
    CAST(median(bytes) AS DOUBLE) AS med_bytes,
    min(bytes) AS min_bytes,
    max(bytes) AS max_bytes,
    coalesce(stddev_samp(bytes), 0.0) AS stddev_bytes,
    100.0 * sum(d) / NULLIF(sum(sum(d)) OVER (PARTITION BY rank), 0) AS pct,
    CASE
        WHEN lower(kind) = 'memset' THEN '[CUDA memset]'
        WHEN kind LIKE 'Unified Memory %' THEN '[CUDA Unified Memory memcpy ' || substr(kind, 16) || ']'
        ELSE '[CUDA memcpy ' || kind || ']'
    END AS label,
    comms
FROM m
GROUP BY rank, kind, comms
ORDER BY rank, total_ns DESC, kind, comms;
