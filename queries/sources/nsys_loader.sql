-- The statements of one Nsight Systems export's load, one INSERT ... SELECT per table (nsight_analyze/sources/nsys_loader.py).

-- name: create_rank_map
-- The file's processes that are ranks, and their rank numbers.
CREATE TEMP TABLE $rank_map (global_pid BIGINT, rank INTEGER)

-- name: insert_values
INSERT INTO $table VALUES $rows

-- name: kernel_rows
-- Kernels, their names and categories joined from the file's distinct name id pairs ($names).
SELECT m.rank, CAST(x.deviceId AS INTEGER), CAST(x.streamId AS BIGINT),
       CAST(x.start AS BIGINT), CAST(x."end" AS BIGINT), CAST(x."end" - x.start AS BIGINT),
       c.name, c.short_name, CAST(x.correlationId AS BIGINT),
       x.gridX, x.gridY, x.gridZ, x.blockX, x.blockY, x.blockZ,
       $registers,
       $static_shared,
       $dynamic_shared,
       $graph_id, $graph_node_id, c.category, c.subcategory
FROM $table x JOIN $rank_map m ON m.global_pid = $pid
LEFT JOIN $names c ON c.dn = coalesce($dn, -1) AND c.sn = coalesce($sn, -1)

-- name: kernel_name_ids
-- The distinct (demangled, short) name id pairs the probe found, with their text.
CREATE OR REPLACE TEMP TABLE $names AS
SELECT coalesce($dn, -1) AS dn, coalesce($sn, -1) AS sn,
       COALESCE($name, $short) AS name, $short AS short_name
FROM (SELECT unnest($demangled_ids::BIGINT[]) AS demangledName,
             unnest($short_ids::BIGINT[]) AS shortName) x$joins

-- name: kernel_name_texts
SELECT name FROM $names

-- name: kernel_names_classified
CREATE OR REPLACE TEMP TABLE $names AS
SELECT n.*, m.category, m.subcategory FROM $names n LEFT JOIN ${names}_map m USING (name)

-- name: memcpy_rows
SELECT m.rank, CAST(x.deviceId AS INTEGER), CAST(x.streamId AS BIGINT),
       CAST(x.start AS BIGINT), CAST(x."end" AS BIGINT), CAST(x."end" - x.start AS BIGINT),
       $kind, CAST(x.bytes AS BIGINT), $src, $dst, CAST(x.correlationId AS BIGINT),
       $graph_node_id
$ranked$joins

-- name: memset_rows
SELECT m.rank, CAST(x.deviceId AS INTEGER), CAST(x.streamId AS BIGINT),
       CAST(x.start AS BIGINT), CAST(x."end" AS BIGINT), CAST(x."end" - x.start AS BIGINT),
       'memset', CAST(x.bytes AS BIGINT), NULL, $mem, CAST(x.correlationId AS BIGINT),
       $graph_node_id
$ranked$joins

-- name: api_class
-- runtime / driver by the call's eventClass ($whens), else other.
CASE $whens ELSE 'other' END

-- name: api_names
-- The ABI suffix is cut once per string (far fewer than calls), not once per call.
SELECT id, regexp_replace(value, $abi_suffix, '') AS name FROM $strings

-- name: api_name_of_row
regexp_replace(x."name", $abi_suffix, '')

-- name: api_rows
SELECT m.rank, CAST(x.globalTid % $pid_divisor AS BIGINT),
       CAST(x.start AS BIGINT), CAST(x."end" AS BIGINT), CAST(x."end" - x.start AS BIGINT),
       $name, CAST(x.correlationId AS BIGINT),
       $return_value, $api_class
$ranked$joins

-- name: api_only_processes
-- Calls per process that is not a rank (launchers): counted, not loaded.
SELECT $pid AS gpid, count(*) FROM $table x
WHERE gpid IS NULL OR gpid NOT IN (SELECT global_pid FROM $rank_map)
GROUP BY 1 ORDER BY 1

-- name: sync_type
CASE $whens ELSE 'unknown' END

-- name: sync_rows
SELECT m.rank, CAST(x.deviceId AS INTEGER), CAST(x.streamId AS BIGINT),
       CAST(x.start AS BIGINT), CAST(x."end" AS BIGINT), CAST(x."end" - x.start AS BIGINT),
       $sync_type, $event_id, CAST(x.correlationId AS BIGINT)
$ranked

-- name: nvtx_text
COALESCE($text_id, $text)

-- name: nvtx_payload
-- The JSON payload: of --include-json, else decoded from binaryData (nvtx_binary).
COALESCE($json_id, $json_text, $binary)

-- name: nvtx_type
CASE $whens END

-- name: nvtx_domains
-- Domain names come from the domain-create rows (eventType 75) of the same process.
(SELECT $pid AS gpid, $domain_col AS domain_id,
        COALESCE($text_id, $text) AS name
 FROM $table x$joins WHERE x.eventType = 75)

-- name: nvtx_rows
SELECT m.rank, CAST(x.globalTid % $pid_divisor AS BIGINT),
       CAST(x.start AS BIGINT), CAST(x."end" AS BIGINT), $text, d.name, $nvtx_type, $payload
FROM $table x JOIN $rank_map m ON m.global_pid = $pid$joins
LEFT JOIN $domains d ON d.gpid = $pid AND d.domain_id = $domain_col
WHERE x.eventType IN ($types)

-- name: nvtx_other_types
-- Naming and domain rows (metadata, not ranges).
x.eventType NOT IN ($types) OR x.eventType IS NULL

-- name: nvtx_range_types
x.eventType IN ($types)

-- name: thread_rows
SELECT m.rank, CAST(x.globalTid % $pid_divisor AS BIGINT), $name
$ranked$joins

-- name: metric_utc
CAST(x.timestamp AS BIGINT) + $utc0

-- name: metric_gpus
-- The GPU a metric sample's typeId names (its low byte), one row per id.
(SELECT DISTINCT ON (id) * FROM $gpus ORDER BY ALL)

-- name: gpu_metric_rows
-- Source/host/GPU identity as DCGM rows have them (schema.sql: gpu_metrics is shared).
SELECT $rank, CAST(x.typeId % 256 AS INTEGER), CAST(x.timestamp AS BIGINT), t.metricName,
       CAST(x.value AS DOUBLE), 'nsys', $file_id, $host, CAST($uuid AS VARCHAR),
       CAST($name AS VARCHAR), $utc
FROM $metrics x JOIN $metric_names t
  ON t.typeId = x.typeId AND t.metricId = x.metricId$joins

-- name: insert_gpu_metrics
INSERT INTO gpu_metrics (rank, gpu_id, timestamp_ns, metric_name, value, source, file_id, host, gpu_uuid, gpu_name, utc_ns) $select

-- name: device_memory
-- Device and Device Static allocations ($kinds): what counts against the GPU's capacity.
x.memKind IN ($kinds)

-- name: not_device_memory
NOT ($device)

-- name: memory_order
-- A total order of what the running sum reads (rows tied on it add the same bytes).
ORDER BY x.start, x.memoryOperationType DESC, x.bytes

-- name: memory_order_with_address
ORDER BY x.start, x.memoryOperationType DESC, x.address, x.bytes

-- name: memory_usage_rows
-- Per process and device, the running sum of allocations minus frees ($order: frees first at one ns).
SELECT m.rank, CAST(x.deviceId AS INTEGER), CAST(x.start AS BIGINT),
       CAST(sum(CASE WHEN x.memoryOperationType = 0 THEN x.bytes ELSE -x.bytes END)
            OVER (PARTITION BY x.globalPid, x.deviceId $order
                  ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS BIGINT),
       NULL, 'nsys'
$ranked WHERE $device

-- name: memory_below_zero
-- The file's ranks' rows whose bytes in use fell below zero (frees of allocations made before the capture).
SELECT count(*) FROM memory_usage WHERE source = 'nsys' AND bytes_in_use < 0 AND rank IN (SELECT rank FROM $rank_map)

-- name: past_capture
-- Per GPU table: rows of the file's ranks that end more than $past_ns after the capture stopped
-- (ANALYSIS_DETAILS.stopTime, the events' own time base), and by how much.
SELECT t, count(*), max(end_ns) - any_value(stop)
FROM (SELECT 'kernels' AS t, end_ns FROM kernels WHERE rank IN (SELECT rank FROM $rank_map)
      UNION ALL SELECT 'memops' AS t, end_ns FROM memops WHERE rank IN (SELECT rank FROM $rank_map))
CROSS JOIN (SELECT max(stopTime) AS stop FROM $alias."ANALYSIS_DETAILS")
WHERE end_ns > stop + $past_ns GROUP BY t ORDER BY t

-- name: diagnostic_warnings
x.severity >= 2

-- name: api_names_join
-- the runtime calls' names, cut of their ABI suffix (api_names), joined by nameId
LEFT JOIN ($names) n ON n.id = x.nameId

-- name: metric_gpus_join
-- the GPU a metric row was sampled on (the low byte of typeId)
LEFT JOIN $gpus g ON g.id = x.typeId % 256
