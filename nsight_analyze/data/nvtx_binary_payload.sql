-- nvtx_binary_payload: NVTX_EVENTS.binaryData decoded with the payload schemas, as JSON text.
-- Why: an nsys export without --include-json keeps NCCL's NVTX metadata (communicator, message
-- size, peer, ranks; with the advanced NCCL trace apiId, seqNumber, ...) only in binaryData, laid
-- out by NVTX_PAYLOAD_SCHEMAS / NVTX_PAYLOAD_SCHEMA_ENTRIES. Rendered as the JSON object the
-- --include-json export writes ({"entry name": value, ...} in entry order), every reader of the
-- nvtx table's payload (queries/comms/_merge_nccl_payload.sql, ...) reads both exports alike.
-- Run by nsight_analyze/sources/nvtx_binary.py on the attached export; @SRC@ is its alias.
-- One row per NVTX_EVENTS row (its SQLite rowid) whose blob has a known schema:
--   rid      BIGINT   NVTX_EVENTS.rowid
--   payload  VARCHAR  JSON object text
-- Layout (the schema tables' columns and NCCL's legacy schema rows are those of the shared real
-- nsys-ai exports, nsys 2026.2.1; those were exported without blobs, binaryData NULL, so no real
-- blob has been decoded here yet):
--   * blob = 32-byte header [domainId u64][schemaId u64][payloadSize u64][payloadOffset u64],
--     little-endian, then the payload at payloadOffset (GindaChen/nsys-ai nccl_communicator.py,
--     which decodes real `nsys export --include-blobs=true` exports). The value is a BLOB in a
--     column declared TEXT (DuckDB's SQLite reader refuses it, hence sqlite_query with SQLite's
--     hex()); a TEXT value made of hex digits is taken as the hex form of the same bytes.
--   * entry types, sizes and signedness: NVTX's nvToolsExtPayload.h (NVTX_PAYLOAD_ENTRY_TYPE_*;
--     sizes of an LP64 Linux target: long, size_t and pointers 8 bytes). A type >= 1 << 24 is a
--     registered schema id: NCCL's only such entry is its reduction-op enum
--     (NVTX_PAYLOAD_ENTRY_NCCL_REDOP, a C enum: 4 bytes, shown as its integer value).
--   * offset: the entry's `offset`; NULL (as the real exports write for every first entry) means
--     the natural offset: 0 for the first entry, else the end of the previous entry rounded up to
--     the entry's own size (C self-alignment; unknown after an entry of unknown size).
--   * schema rows are listed once per process and have no process column: identical rows are
--     taken once.
-- Entries this does not decode (floating point, strings, arrays, nested schemas other than enums)
-- are written as JSON null, never left out; a blob whose schema is missing gets no row (the
-- loader counts those, nvtx_binary.undecoded).
-- Cost: one join of the events with the few schemas (each schema one row holding its entries as a
-- list, decoded by a lambda; no per-entry rows, no GROUP BY): 100k blobs in 1.6 s on 2 shared cores
-- (DuckDB 1.5.5), 8x less than a row per entry with byte lists.
WITH blobs AS (
    SELECT CAST(rid AS BIGINT) AS rid, upper(h) AS h
    FROM sqlite_query('@SRC@', 'SELECT rowid AS rid, CASE WHEN typeof(binaryData) = ''blob''
                                    OR binaryData GLOB ''*[^0-9A-Fa-f]*'' THEN hex(binaryData)
                                    ELSE binaryData END AS h
                                FROM NVTX_EVENTS WHERE binaryData IS NOT NULL')
    WHERE length(h) >= 64
),
header AS (
    -- the four little-endian u64 of the header: byte i of the blob is hex digits 2i+1..2i+2
    SELECT rid, h,
           ('0x' || array_to_string(list_reverse(list_transform(
               range(8), i -> substr(h, 1 + 2 * i, 2))), ''))::UBIGINT AS domain_id,
           ('0x' || array_to_string(list_reverse(list_transform(
               range(8), i -> substr(h, 17 + 2 * i, 2))), ''))::UBIGINT AS schema_id,
           ('0x' || array_to_string(list_reverse(list_transform(
               range(8), i -> substr(h, 33 + 2 * i, 2))), ''))::UBIGINT AS payload_size,
           ('0x' || array_to_string(list_reverse(list_transform(
               range(8), i -> substr(h, 49 + 2 * i, 2))), ''))::UBIGINT AS payload_offset
    FROM blobs
),
types (type, size, signed, integral) AS (
    VALUES (1, 1, true, true), (2, 1, false, true), (3, 2, true, true), (4, 2, false, true),
           (5, 4, true, true), (6, 4, false, true), (7, 8, true, true), (8, 8, false, true),
           (9, 8, true, true), (10, 8, false, true), (11, 1, true, true), (12, 1, false, true),
           (13, 2, true, true), (14, 2, false, true), (15, 4, true, true), (16, 4, false, true),
           (17, 8, true, true), (18, 8, false, true), (22, 8, false, true), (23, 8, false, true),
           (32, 1, false, true),
           -- not decoded (JSON null), sized for the offsets of the entries after them
           (19, 4, false, false), (20, 8, false, false), (24, 4, false, false), (25, 1, false, false),
           (26, 2, false, false), (27, 4, false, false), (42, 2, false, false), (43, 4, false, false),
           (44, 8, false, false), (50, 2, false, false), (52, 4, false, false)
),
entries AS (
    -- identical rows (one per process) once; two processes' different schemas under one id (dynamic
    -- ids) cannot be told apart, their entries would both be listed
    SELECT DISTINCT e.domainId AS domain_id, e.schemaId AS schema_id, e.idx, e.name,
           CAST(e.offset AS BIGINT) AS off,
           -- NULL (unknown) for strings, nested schemas and arrays: the entries after them without
           -- an offset of their own are then not placed (JSON null), never guessed
           CASE WHEN COALESCE(e.flags, 0) & 62 = 0
                THEN COALESCE(t.size, CASE WHEN e.type >= 16777216 THEN 4 END) END AS size,
           COALESCE(t.signed, e.type >= 16777216) AS signed,
           -- decoded: a scalar integer (flags 62: POINTER, OFFSET_*, ARRAY_*)
           COALESCE(t.integral, e.type >= 16777216) AND COALESCE(e.flags, 0) & 62 = 0 AS decoded
    FROM "@SRC@"."NVTX_PAYLOAD_SCHEMA_ENTRIES" AS e
    LEFT JOIN types AS t ON t.type = e.type
),
laid AS (
    -- offsets of entries without one: a walk down each schema's few entries
    WITH RECURSIVE walk (domain_id, schema_id, idx, off, size) AS (
        SELECT domain_id, schema_id, idx, COALESCE(off, 0), size
        FROM entries WHERE idx = 0
        UNION ALL
        SELECT e.domain_id, e.schema_id, e.idx,
               COALESCE(e.off, (w.off + w.size + COALESCE(e.size, 1) - 1) // COALESCE(e.size, 1)
                               * COALESCE(e.size, 1)),
               e.size
        FROM entries AS e
        JOIN walk AS w ON w.domain_id = e.domain_id AND w.schema_id = e.schema_id AND e.idx = w.idx + 1
    )
    SELECT e.domain_id, e.schema_id, e.idx, e.name, w.off, e.size, e.signed, e.decoded
    FROM entries AS e
    JOIN walk AS w ON w.domain_id = e.domain_id AND w.schema_id = e.schema_id AND w.idx = e.idx
),
schemas AS (
    -- one row per schema: its entries in order, so each event joins one row (no per-entry rows)
    SELECT domain_id, schema_id,
           list({'name': COALESCE(name, 'entry ' || idx), 'off': off, 'size': size, 'signed': signed,
                 'decoded': decoded} ORDER BY idx) AS entries
    FROM laid
    GROUP BY ALL
),
raw AS (
    -- per entry its unsigned value (NULL: not decoded): the entry's hex digits, bytes reversed
    SELECT hd.rid, list_transform(s.entries, e -> {
               'name': e.name, 'size': e.size, 'signed': e.signed,
               'u': CASE WHEN e.decoded AND e.off + e.size <= hd.psize THEN ('0x' || (
                   CASE e.size
                       WHEN 1 THEN substr(hd.h, 1 + 2 * (hd.poff + e.off), 2)
                       WHEN 2 THEN substr(hd.h, 3 + 2 * (hd.poff + e.off), 2)
                                || substr(hd.h, 1 + 2 * (hd.poff + e.off), 2)
                       WHEN 4 THEN substr(hd.h, 7 + 2 * (hd.poff + e.off), 2)
                                || substr(hd.h, 5 + 2 * (hd.poff + e.off), 2)
                                || substr(hd.h, 3 + 2 * (hd.poff + e.off), 2)
                                || substr(hd.h, 1 + 2 * (hd.poff + e.off), 2)
                       ELSE substr(hd.h, 15 + 2 * (hd.poff + e.off), 2)
                                || substr(hd.h, 13 + 2 * (hd.poff + e.off), 2)
                                || substr(hd.h, 11 + 2 * (hd.poff + e.off), 2)
                                || substr(hd.h, 9 + 2 * (hd.poff + e.off), 2)
                                || substr(hd.h, 7 + 2 * (hd.poff + e.off), 2)
                                || substr(hd.h, 5 + 2 * (hd.poff + e.off), 2)
                                || substr(hd.h, 3 + 2 * (hd.poff + e.off), 2)
                                || substr(hd.h, 1 + 2 * (hd.poff + e.off), 2) END))::UBIGINT
                    END}) AS vals
    FROM (SELECT *, TRY_CAST(payload_offset AS BIGINT) AS poff, TRY_CAST(payload_size AS BIGINT) AS psize
          FROM header) AS hd
    JOIN schemas AS s ON s.domain_id = hd.domain_id AND s.schema_id = hd.schema_id
    WHERE hd.poff >= 32 AND 2 * (hd.poff + hd.psize) <= length(hd.h)
)
SELECT rid, '{' || array_to_string(list_transform(vals, v -> to_json(v.name)::VARCHAR || ': ' || CASE
           WHEN v.u IS NULL THEN 'null'
           WHEN v.signed AND v.size < 8 AND v.u >= 1::UBIGINT << (8 * v.size - 1)::UBIGINT
               THEN CAST(v.u::BIGINT - (1::BIGINT << (8 * v.size)::BIGINT) AS VARCHAR)
           WHEN v.signed AND v.size = 8 THEN CAST(v.u::HUGEINT - CASE WHEN v.u >= 1::UBIGINT << 63 THEN
               18446744073709551616::HUGEINT ELSE 0 END AS VARCHAR)
           ELSE CAST(v.u AS VARCHAR) END), ', ') || '}' AS payload
FROM raw
