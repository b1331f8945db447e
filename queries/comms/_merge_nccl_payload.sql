-- _merge_nccl_payload: NCCL's NVTX payload (communicator, message size, sequence) per NCCL kernel
-- and per copy of a copy-engine collective (nccl_ce_copies).
-- Why: the communicator id is the exact key for matching an operation across ranks; it
-- is only on the host side, in the payload of the NCCL API range (ncclAllReduce, ...)
-- that issued the kernel's launch call, so the range is projected to the kernel through
-- the launch call (same rank and thread, call start inside the range; innermost = latest
-- starting range wins) and the kernel's correlation id.
-- Columns:
--   rank            INTEGER
--   correlation_id  BIGINT   of the kernel (or copy-engine copy) and its launch call
--   comm            VARCHAR  communicator id from the payload (NULL when absent)
--   payload_seq     BIGINT   sequence number from the payload (NULL when absent)
--   bytes           BIGINT   message size in bytes from the payload (NULL when absent)
--   peer            INTEGER  peer of a point-to-point call (ncclSend/ncclRecv "Peer rank"), a rank
--                            of the communicator `comm` (NULL when absent)
--   api_id          BIGINT   NCCL's own operation id ("apiId") of the advanced NCCL trace (nsys
--                            2025.6.1+, NCCL >= 2.28, `--nccl-trace`): the same on every rank taking
--                            part in one collective (Nsight Systems user guide, "NVIDIA NCCL Trace",
--                            Event Correlation); NULL with the legacy NVTX ranges
--   comm_ranks      INTEGER  ranks in the communicator when the payload says so ("nRanks",
--                            "No. of ranks"); NULL when absent
--   api_name        VARCHAR  name of the NVTX range whose payload this is (the API range: ncclAllGather,
--                            AllGather, ...; NULL without a payload): the operation of a copy-engine
--                            collective, which has no kernel name (_nccl_ce_ops)
--   api_range       VARCHAR  that range's identity on the rank ('<tid>@<start_ns>'; NULL without a
--                            payload): the copies of one copy-engine collective share it (_nccl_ce_ops)
-- The payload is the JSON text of an --include-json export or, without it, NVTX_EVENTS.binaryData
-- decoded by the loader into the same JSON (sources/nvtx_binary.py, data/nvtx_binary_payload.sql:
-- keys are the schema entries' names, values numbers; the advanced trace's commHash is then a
-- number where its JSON writes "0x..." text, a spelling every rank of one export shares).
-- Payload keys are matched loosely (JSON text, case-insensitive): "NCCL communicator ID" or
-- "commHash", else a key containing "comm" -> comm; "seq" -> payload_seq; "message size" / "bytes"
-- / "size" -> bytes; "peer" -> peer; exactly "apiId" -> api_id; "nRanks" / "No. of ranks" ->
-- comm_ranks. The advanced trace names its ranges without the nccl prefix (AllReduce, KernelLaunch,
-- ...) in the NCCL domain; the innermost range around the launch call is its KernelLaunch range
-- (`--nccl-trace=...,kernel-launch`) or the API call's own range. When that range names no apiId
-- but a group ("apiGroupId": NCCL's KernelLaunch and GroupLaunch ranges belong to the thread's
-- group, whose API range (AllReduce, ...) holds the enqueue, not the launch), the payload is that
-- of the thread's one API range of the group carrying an apiId; a group of several operations (one
-- launch for several collectives) gives no payload: which operation the kernel is cannot be told
-- (its key then falls back, merge_nccl_kernels).
-- Sources: the NVTX ranges' entry names are NCCL's own payload schemas (NCCL >= 2.19,
-- src/include/nvtx_payload_schemas.h: "NCCL communicator ID", "Message size [bytes]", "Peer rank",
-- "Rank", "No. of ranks"; "Parent NCCL communicator ID" only on ncclCommSplit, never on a kernel's
-- range). The advanced trace's "apiId" / "apiGroupId" and the range names are from the documents
-- (docs/metrics.md "Collectives"), not yet from a real capture: no searchable copy of the user
-- guide's "NVIDIA NCCL Trace" section names its payload keys. The Analysis Guide's "Recipe
-- Composite Tables" names the fields the recipe framework parses from those NVTX events into its
-- in-memory NCCL_GPU_OPERATIONS(_COLLECTIVE) DataFrames: commHash, commRank, count, dataType,
-- operationClass, operationId, seqNumber, apiId (docs/metrics.md "Collectives").
-- Copy-engine collectives (NCCL >= 2.28 `ce-coll`): their copies' launch calls (nccl_ce_copies) are
-- projected like a kernel's launch call. NOT CONFIRMED by a real capture (no shared trace has a
-- copy-engine collective): that the copies' calls lie in `CE Batch` / `CE Sync` ranges naming only
-- the group (apiGroupId), as the generator writes them, is from the documents.
-- stage: rank
-- result: view
-- requires: kernels, cuda_api, nvtx, nccl_ce_copies
CREATE OR REPLACE VIEW _merge_nccl_payload AS
WITH ranges AS (
    SELECT rank, tid, start_ns, end_ns, text, payload
    FROM nvtx
    WHERE payload IS NOT NULL
      AND end_ns IS NOT NULL
      -- NCCL's domain (the advanced trace's plugin domain may be named otherwise: its payload keys
      -- tell it, even when the domain-create row is missing)
      AND (domain ILIKE '%nccl%' OR text LIKE 'nccl%' OR contains(payload, '"apiId"')
           OR contains(payload, '"apiGroupId"'))
),
launches AS (
    -- kernel -> launch call; skipped (empty build side) when no rank has NCCL payloads
    SELECT a.rank, a.tid, a.start_ns, a.correlation_id
    FROM (
        SELECT rank, correlation_id FROM kernels
        WHERE (starts_with(name, 'nccl') OR starts_with(name, 'void nccl'))
          AND rank IN (SELECT DISTINCT rank FROM ranges)
        UNION  -- the copies of copy-engine collectives (one call may issue several)
        SELECT rank, correlation_id FROM nccl_ce_copies
        WHERE rank IN (SELECT DISTINCT rank FROM ranges)
    ) AS k
    JOIN cuda_api AS a ON a.rank = k.rank AND a.correlation_id = k.correlation_id
),
innermost AS (
    SELECT l.rank, l.tid, l.correlation_id, r.payload, r.text, r.start_ns AS range_start_ns
    FROM launches AS l
    ASOF JOIN ranges AS r ON r.rank = l.rank AND r.tid = l.tid AND l.start_ns >= r.start_ns
    WHERE l.start_ns < r.end_ns
),
group_api AS (
    -- per thread and advanced-trace group (thread-local): its API ranges that carry an apiId (one
    -- = unambiguous)
    SELECT rank, tid, regexp_extract(payload, '"apiGroupId"\s*:\s*"?([0-9]+)', 1) AS gid,
           COUNT(*) AS n, any_value(payload) AS payload, any_value(text) AS text,
           any_value(start_ns) AS range_start_ns
    FROM ranges
    WHERE contains(payload, '"apiGroupId"') AND contains(payload, '"apiId"')
    GROUP BY ALL
),
projected AS (
    SELECT i.rank, i.correlation_id, i.tid,
           contains(i.payload, '"apiId"') OR NOT contains(i.payload, '"apiGroupId"') AS own,
           CASE WHEN own THEN i.payload WHEN g.n = 1 THEN g.payload END AS payload,
           CASE WHEN own THEN i.text WHEN g.n = 1 THEN g.text END AS api_name,
           CASE WHEN own THEN i.range_start_ns WHEN g.n = 1 THEN g.range_start_ns END AS api_start_ns
    FROM innermost AS i
    LEFT JOIN group_api AS g
        ON g.rank = i.rank AND g.tid = i.tid
       AND g.gid = regexp_extract(i.payload, '"apiGroupId"\s*:\s*"?([0-9]+)', 1)
)
SELECT
    rank,
    correlation_id,
    COALESCE(
        -- the communicator's own keys first: a "commRank" key (NCCL_GPU_OPERATIONS' payload fields)
        -- also contains "comm"
        NULLIF(regexp_extract(payload, '"(?:NCCL communicator ID|commHash)"\s*:\s*"?([0-9A-Za-z_]+)', 1), ''),
        NULLIF(regexp_extract(payload, '(?i)"[^"]*comm[^"]*"\s*:\s*"?([0-9A-Za-z_]+)', 1), '')
    ) AS comm,
    TRY_CAST(NULLIF(regexp_extract(payload, '(?i)"[^"]*seq[^"]*"\s*:\s*"?([0-9]+)', 1), '') AS BIGINT)
        AS payload_seq,
    TRY_CAST(NULLIF(regexp_extract(
        payload, '(?i)"[^"]*(?:message size|bytes|size)[^"]*"\s*:\s*"?([0-9]+)', 1), '') AS BIGINT) AS bytes,
    TRY_CAST(NULLIF(regexp_extract(payload, '(?i)"[^"]*peer[^"]*"\s*:\s*"?(-?[0-9]+)', 1), '') AS INTEGER) AS peer,
    TRY_CAST(NULLIF(regexp_extract(payload, '"apiId"\s*:\s*"?([0-9]+)', 1), '') AS BIGINT) AS api_id,
    TRY_CAST(NULLIF(regexp_extract(payload, '(?i)"(?:nRanks|No\. of ranks)"\s*:\s*"?([0-9]+)', 1), '') AS INTEGER)
        AS comm_ranks,
    api_name,
    CASE WHEN api_start_ns IS NOT NULL THEN tid || '@' || api_start_ns END AS api_range
FROM projected;
