-- The statements of the DCGM reader and its rank matching (nsight_analyze/sources/dcgm.py).

-- name: insert_samples
-- A file's samples ($file_id), rank NULL until match_ranks; an untimed sample numbered by its time.
INSERT INTO gpu_metrics (rank, gpu_id, timestamp_ns, metric_name, value, source, file_id,
        host, gpu_uuid, gpu_name, gpu_instance, utc_ns, sample, labels)
SELECT NULL, gpu_id, NULL, metric_name, value, 'dcgm', $file_id, host, gpu_uuid,
       gpu_name, gpu_instance, utc_ns,
       coalesce(sample, dense_rank() OVER (ORDER BY utc_ns) - 1)::INTEGER,
       labels::JSON::MAP(VARCHAR, VARCHAR)
FROM _dcgm_rows

-- name: norm_uuid
-- A GPU UUID without its GPU- / MIG- prefix, lower case.
lower(regexp_replace($column, '^(GPU|MIG)-', '', 'i'))

-- name: norm_bus
-- The bus:device.function tail of a PCI bus id, lower case.
lower(regexp_extract($column, '([0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])$$', 1))

-- name: short_host
-- A host name without its domain, lower case.
lower(split_part($column, '.', 1))

-- name: rank_matches
-- Per sampled GPU, the rank(s) of its strongest evidence and how many ranks that is; the
-- $placeholders are norm_uuid / norm_bus / short_host of the columns they name.
WITH gpu AS (
    -- the GPU each rank ran on
    SELECT r.rank, r.hostname, r.device_id, r.session_start_utc_ns,
           $g_uuid AS uuid, $g_bus AS bus
    FROM ranks r LEFT JOIN gpus g ON g.rank = r.rank AND g.device_id IS NOT DISTINCT FROM r.device_id
),
hosts AS (
    -- the distinct hosts the ranks name (ranks without a host name count as none)
    SELECT count(DISTINCT $ranks_host) AS n FROM ranks
),
s AS (
    -- the GPUs DCGM sampled (whole GPUs: MIG instance rows are not a rank's)
    SELECT DISTINCT file_id, host, gpu_id, gpu_uuid, labels['pci_bus_id'] AS pci
    FROM gpu_metrics WHERE source = 'dcgm' AND gpu_instance IS NULL
),
cand AS (
    SELECT s.*, gpu.rank, gpu.session_start_utc_ns,
           CASE WHEN gpu.uuid <> '' AND gpu.uuid = $s_uuid THEN 1
                WHEN $s_host = $gpu_host
                     AND gpu.bus <> '' AND gpu.bus = $s_bus THEN 2
                WHEN $s_host = $gpu_host
                     AND s.gpu_id = gpu.device_id AND (gpu.uuid IS NULL OR s.gpu_uuid IS NULL) THEN 3
                WHEN s.host IS NULL AND (SELECT n FROM hosts) <= 1
                     AND s.gpu_id = gpu.device_id AND (gpu.uuid IS NULL OR s.gpu_uuid IS NULL) THEN 4
           END AS how
    FROM s JOIN gpu ON true
),
best AS (
    -- per sampled GPU, the ranks of its strongest evidence; taken only when it is one rank
    SELECT file_id, host, gpu_id, gpu_uuid, min(how) AS how
    FROM cand WHERE how IS NOT NULL GROUP BY ALL
)
SELECT c.file_id, c.host, c.gpu_id, c.gpu_uuid, any_value(c.rank) AS rank,
       any_value(c.session_start_utc_ns) AS session_start_utc_ns, count(*) AS ranks,
       CASE b.how WHEN 1 THEN 'uuid' WHEN 2 THEN 'host+pci_bus_id' WHEN 3 THEN 'host+gpu_index'
                  ELSE 'gpu_index (no host, one-host workspace)' END AS how
FROM cand c JOIN best b ON b.file_id = c.file_id AND b.how = c.how
    AND b.host IS NOT DISTINCT FROM c.host AND b.gpu_id IS NOT DISTINCT FROM c.gpu_id
    AND b.gpu_uuid IS NOT DISTINCT FROM c.gpu_uuid
GROUP BY ALL

-- name: clear_matches
-- Matching starts from scratch on every ingest.
UPDATE gpu_metrics SET rank = NULL, timestamp_ns = NULL, rank_match = NULL WHERE source = 'dcgm'

-- name: apply_matches
-- The rank, the evidence and the rank's file time of the samples of each GPU matched to one rank.
UPDATE gpu_metrics AS g SET rank = m.rank, rank_match = m.how,
       timestamp_ns = g.utc_ns - m.session_start_utc_ns
FROM _dcgm_match m
WHERE g.source = 'dcgm' AND g.gpu_instance IS NULL AND g.file_id = m.file_id
  AND g.host IS NOT DISTINCT FROM m.host AND g.gpu_id IS NOT DISTINCT FROM m.gpu_id
  AND g.gpu_uuid IS NOT DISTINCT FROM m.gpu_uuid

-- name: sampled_gpus
-- The whole GPUs DCGM sampled.
SELECT count(*) FROM (SELECT DISTINCT host, gpu_id, gpu_uuid FROM gpu_metrics WHERE source = 'dcgm'
AND gpu_instance IS NULL)

-- name: hostless_gpus
-- Sampled GPUs that name no host and were given no rank.
SELECT count(*) FROM (SELECT DISTINCT file_id, gpu_id, gpu_uuid FROM gpu_metrics
WHERE source = 'dcgm' AND gpu_instance IS NULL AND host IS NULL AND rank IS NULL)

-- name: rank_hosts
SELECT DISTINCT hostname FROM ranks WHERE hostname IS NOT NULL ORDER BY 1
