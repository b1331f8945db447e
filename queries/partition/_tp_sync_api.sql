-- _tp_sync_api: synchronising CUDA and HIP API calls of every rank (the host blocks until the GPU
-- catches up).
-- Why: a GPU gap whose host stall coincides with one of these calls is a sync stall, not slow host
-- code; sync_calls lists them with the GPU idle time they caused. ROCm traces (Kineto on AMD
-- GPUs) name the same calls hip*: without them a blocking hipMemcpyWithStream was never a sync.
-- Columns: rank INTEGER, tid BIGINT, start_ns, end_ns BIGINT ns, name VARCHAR (ABI suffix
--   stripped), correlation_id BIGINT, reason VARCHAR: 'sync' (explicit synchronisation),
--   'sync copy' (synchronous memcpy/memset), 'pageable async copy'.
-- Definition (docs/metrics.md): cudaDeviceSynchronize, cudaStreamSynchronize,
--   cudaEventSynchronize, cuCtxSynchronize, cuStreamSynchronize, cuEventSynchronize; cudaMemcpy,
--   cudaMemcpy2D, cudaMemcpy3D, cudaMemcpyToSymbol, cudaMemcpyFromSymbol, cudaMemset,
--   cuMemcpyDtoH, cuMemcpyHtoD; their HIP twins hipDeviceSynchronize, hipStreamSynchronize,
--   hipEventSynchronize, hipCtxSynchronize, hipMemcpy, hipMemcpy2D, hipMemcpy3D,
--   hipMemcpyToSymbol, hipMemcpyFromSymbol, hipMemset, hipMemcpyDtoH, hipMemcpyHtoD and
--   hipMemcpyWithStream (synchronous on the host); and any cudaMemcpy*Async / hipMemcpy*Async
--   whose operation (memops, same rank and correlation_id) has Pageable source or destination
--   memory. cudaStreamWaitEvent / hipStreamWaitEvent are not here: the GPU waits, not the host
--   (_tp_gaps reads them as a dependency).
-- stage: rank
-- result: step
-- requires: memops, cuda_api, sync
CREATE OR REPLACE VIEW _tp_sync_api AS
WITH names AS (
    -- the regex runs once per distinct API name, not once per call
    SELECT name, regexp_replace(name, '_v\d+$', '') AS clean
    FROM (SELECT DISTINCT name FROM cuda_api WHERE name LIKE 'cu%' OR name LIKE 'hip%')
    WHERE regexp_matches(name, '^(cudaDeviceSynchronize|cudaStreamSynchronize|cudaEventSynchronize|'
          || 'cuCtxSynchronize|cuStreamSynchronize|cuEventSynchronize|cudaMemcpy|cudaMemcpy2D|cudaMemcpy3D|'
          || 'cudaMemcpyToSymbol|cudaMemcpyFromSymbol|cudaMemset|cuMemcpyDtoH|cuMemcpyHtoD|'
          || 'hipDeviceSynchronize|hipStreamSynchronize|hipEventSynchronize|hipCtxSynchronize|'
          || 'hipMemcpy|hipMemcpy2D|hipMemcpy3D|hipMemcpyToSymbol|hipMemcpyFromSymbol|hipMemset|'
          || 'hipMemcpyDtoH|hipMemcpyHtoD|hipMemcpyWithStream|'
          || '(cuda|hip)Memcpy\w*Async)(_v\d+)?$')
),
api AS (
    SELECT a.rank, a.tid, a.start_ns, a.end_ns, n.clean AS name, a.correlation_id
    FROM cuda_api AS a
    JOIN names AS n ON n.name = a.name
)
SELECT rank, tid, start_ns, end_ns, name, correlation_id,
       CASE WHEN name LIKE '%Synchronize' THEN 'sync' ELSE 'sync copy' END AS reason
FROM api
WHERE NOT regexp_matches(name, '^(cuda|hip)Memcpy\w*Async$')
UNION ALL
SELECT a.rank, a.tid, a.start_ns, a.end_ns, a.name, a.correlation_id, 'pageable async copy' AS reason
FROM api AS a
WHERE regexp_matches(a.name, '^(cuda|hip)Memcpy\w*Async$')
  AND EXISTS (
      SELECT 1 FROM memops AS mo
      WHERE mo.rank = a.rank AND mo.correlation_id = a.correlation_id
        AND (lower(mo.src_kind) = 'pageable' OR lower(mo.dst_kind) = 'pageable')
  );
