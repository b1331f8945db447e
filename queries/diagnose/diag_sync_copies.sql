-- diag_sync_copies: memory operations that made the host wait (nsys `cuda-sync-memcpy`,
-- `cuda-async-memcpy` and `cuda-sync-memset` parity, one view).
-- Why: a synchronous copy, or an "async" copy touching pageable host memory, blocks the calling
-- thread until the GPU has finished it; the GPU runs dry behind it. Pinned memory plus
-- cudaMemcpyAsync removes the stall.
-- Input: macro parameter htod_min_bytes (B, default 65536): synchronous HtoD copies of at most
--   this many bytes are not listed (nsys ignores them: small HtoD copies are staged and return
--   early).
-- Columns:
--   rank INTEGER, device_id INTEGER, stream_id BIGINT,
--   start_ns BIGINT ns, duration_ns BIGINT ns (the GPU operation, as nsys prints them),
--   end_ns BIGINT ns, kind VARCHAR (memops.kind), bytes BIGINT B, src_kind, dst_kind VARCHAR,
--   api_name VARCHAR (launching call), api_start_ns BIGINT ns, api_duration_ns BIGINT ns,
--   tid BIGINT, correlation_id BIGINT,
--   nsys_rule VARCHAR: 'cuda-sync-memcpy' (synchronous cudaMemcpy*, except DtoD on one device and
--   HtoD <= htod_min_bytes) | 'cuda-async-memcpy' (cudaMemcpy*Async with Pageable source or
--   destination) | 'cuda-sync-memset' (synchronous cudaMemset* on Pinned or Managed memory).
-- Definition: memops joined to their launch call (same rank and correlation_id). A copy issued by
--   two API rows with the same correlation id (e.g. a wrapper and the runtime call) appears once
--   per call, as in nsys.
--   The copies and their calls are the stored pairs of diag_copy_calls, which leaves out the copies
--   of NCCL copy-engine collectives (nccl_ce_copies: communication, not a user's copy; nsys lists
--   them as any other memcpy).
-- stage: job
-- requires: diag_copy_calls
CREATE OR REPLACE MACRO diag_sync_copies(htod_min_bytes := 65536) AS TABLE
WITH j AS (
    SELECT *,
           CASE
               WHEN lower(kind) = 'memset' THEN
                   CASE WHEN api_name ILIKE 'cudaMemset%' AND api_name NOT ILIKE '%async%'
                             AND (dst_kind IN ('Pinned', 'Managed') OR src_kind IN ('Pinned', 'Managed'))
                        THEN 'cuda-sync-memset' END
               WHEN api_name ILIKE 'cudaMemcpy%async%' THEN
                   CASE WHEN 'Pageable' IN (src_kind, dst_kind) THEN 'cuda-async-memcpy' END
               WHEN api_name ILIKE 'cudaMemcpy%' THEN
                   CASE WHEN kind = 'DtoD' THEN NULL
                        WHEN kind = 'HtoD' AND bytes <= htod_min_bytes THEN NULL
                        ELSE 'cuda-sync-memcpy' END
           END AS nsys_rule
    FROM diag_copy_calls
)
SELECT * FROM j WHERE nsys_rule IS NOT NULL;
