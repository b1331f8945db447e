-- _nccl_ce_ops: each copy-engine NCCL collective of a rank as one operation (its copies grouped).
-- Why: a copy-engine collective (NCCL >= 2.28 `ce-coll`) has no kernel; its transfer is one or
-- more memcpys (nccl_ce_copies). To be matched across ranks like a kernel (merge_nccl_kernels ->
-- collectives, waits, skew, bus bandwidth, comm_groups) it must be one row per rank and operation,
-- with the payload of the NCCL API range that issued it (communicator, bytes, apiId).
-- Columns:
--   rank INTEGER, stream_id BIGINT (the first copy's stream), start_ns BIGINT ns (first copy's start),
--   end_ns BIGINT ns (last copy's end), duration_ns BIGINT ns (end_ns - start_ns: the span of the
--   copies, file clock), correlation_id BIGINT (the smallest of its copies' correlation ids: the
--   operation's id on the rank, as a kernel's; it joins _merge_nccl_payload),
--   op VARCHAR (AllGather, AllToAll, ... from the API range's name, with or without the nccl prefix;
--   'Other' when that name is none of NCCL's operations), copies BIGINT (memops grouped),
--   copied_bytes BIGINT (sum of the copies' bytes; the operation's message size is the payload's)
-- Definition: the copies of nccl_ce_copies grouped by the NCCL API range whose payload their launch
--   call gets (_merge_nccl_payload.api_range: the enclosing API range, or the group's API range that
--   carries the apiId); a copy whose call gets no payload is an operation of its own launch call.
-- NOT CONFIRMED by a real capture (no shared trace has a copy-engine collective): the range layout
-- is the documents' (docs/metrics.md "Collectives"), as synth --ce-collectives writes it; whether
-- NCCL issues one collective's copies from one API range, and whether a `CE Batch` range can carry
-- its own apiId (its op would then be 'Other'), no capture has shown.
-- stage: rank
-- result: view
-- requires: _merge_nccl_payload, memops, nccl_ce_copies
CREATE OR REPLACE VIEW _nccl_ce_ops AS
WITH c AS (
    SELECT m.rank, m.stream_id, m.start_ns, m.end_ns, m.correlation_id, m.bytes, p.api_name, p.api_range
    FROM memops AS m
    JOIN (SELECT DISTINCT rank, correlation_id FROM nccl_ce_copies) AS ce
        ON ce.rank = m.rank AND ce.correlation_id = m.correlation_id
    LEFT JOIN _merge_nccl_payload AS p ON p.rank = m.rank AND p.correlation_id = m.correlation_id
)
SELECT
    rank,
    arg_min(stream_id, (start_ns, correlation_id)) AS stream_id,
    MIN(start_ns) AS start_ns,
    MAX(end_ns) AS end_ns,
    MAX(end_ns) - MIN(start_ns) AS duration_ns,
    MIN(correlation_id) AS correlation_id,
    COALESCE(NULLIF(regexp_extract(
        MIN(api_name),
        '^(?:nccl)?(AllReduce|AllGatherV|AllGather|ReduceScatter|Reduce|Broadcast|AllToAll|Gather|Scatter'
        || '|SendRecv|Send|Recv)$',
        1), ''), 'Other') AS op,
    COUNT(*) AS copies,
    SUM(bytes)::BIGINT AS copied_bytes
FROM c
GROUP BY rank, COALESCE(api_range, 'call:' || correlation_id);
