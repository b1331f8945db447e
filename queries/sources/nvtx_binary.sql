-- The statements around the NVTX binary payload decoder (nsight_analyze/sources/nvtx_binary.py); the decoding SELECT itself is nsight_analyze/data/nvtx_binary_payload.sql.

-- name: blob_rows
-- The blobs' row filter inside the decoding statement's SQLite query, which blob_rows_of narrows.
FROM NVTX_EVENTS WHERE binaryData IS NOT NULL

-- name: blob_rows_of
-- The same filter, of the NVTX_EVENTS rows $ids only.
$blob_rows AND rowid IN ($ids)

-- name: binary_payload_count
-- Rows with a binary payload, decoded or not.
SELECT count(*) FROM sqlite_query('$alias', 'SELECT rowid FROM NVTX_EVENTS WHERE binaryData IS NOT NULL')

-- name: decoded_count
SELECT count(*) FROM ($decoded)

-- name: payload_join
-- the decoded binary payload of an NVTX event row ($row), by rowid
LEFT JOIN ($decoded) AS nvtx_bin ON nvtx_bin.rid = $row.rowid
