-- The statements of an Nsight Systems export's metadata probe, read with sqlite3 and DuckDB's SQLite reader (nsight_analyze/sources/nsys_meta.py).

-- name: init_text_resolved
-- An NVTX range's text: through StringIds when the export has textId.
COALESCE(t.value, e.text)

-- name: init_payload_both
-- The JSON payload of an export with both jsonTextId and jsonText.
COALESCE(j.value, e.jsonText)

-- name: init_has_blob
e.binaryData IS NOT NULL

-- name: init_order_by_start
ORDER BY e.start, e.globalTid, e.rowid

-- name: init_order
ORDER BY e.globalTid, e.rowid

-- name: nccl_init_rows
-- NCCL's ncclCommInitRank records (SQLite): their row, process and payload ($payload: JSON
-- text, NULL for a binary one, $blob: whether a binary payload counts; $joins: the StringIds
-- joins of the text and the JSON), the first $limit by time.
SELECT e.rowid, e.globalTid / $pid_divisor, $payload
FROM NVTX_EVENTS e$joins
WHERE $text = 'ncclCommInitRank' AND ($payload IS NOT NULL OR $blob)
      AND e.globalTid IS NOT NULL
$order
LIMIT $limit

-- name: name_id
-- A kernel name id column, -1 when NULL.
coalesce("$column", -1)

-- name: device_census
-- Rows per process, device and kernel name id pair ($name_ids) of a GPU activity table.
SELECT globalPid, deviceId, $name_ids, count(*) FROM $table GROUP BY ALL

-- name: api_processes
-- The processes that made CUDA API calls (an export without GPU activity).
SELECT DISTINCT globalTid // $pid_divisor FROM $table WHERE globalTid IS NOT NULL

-- name: nvtx_main_process
-- The process owning the most NVTX events (SQLite).
SELECT globalTid / $pid_divisor FROM NVTX_EVENTS WHERE globalTid IS NOT NULL GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1

-- name: gpu_rows
-- Every row of a GPU table, in the order of every column ($columns).
SELECT * FROM "$table" ORDER BY $columns

-- name: cuda_devices
SELECT gpuId, cudaId, pid FROM TARGET_INFO_CUDA_DEVICE ORDER BY pid, cudaId, gpuId

-- name: init_text_join
-- an NCCL init event's text, resolved through StringIds
LEFT JOIN StringIds t ON t.id = e.textId

-- name: init_json_join
-- an NCCL init event's JSON payload, resolved through StringIds
LEFT JOIN StringIds j ON j.id = e.jsonTextId
