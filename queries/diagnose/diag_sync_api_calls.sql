-- diag_sync_api_calls: explicit device/stream synchronisation calls (nsys `cuda-sync-api` parity).
-- Why: each call blocks the host until the GPU drains its queue, so the GPU then idles while the
-- host relaunches work; nsys' expert rule lists them and `diagnose` must report the same calls.
-- Columns:
--   rank INTEGER, tid BIGINT, start_ns BIGINT ns (call start, file timeline), end_ns BIGINT ns,
--   duration_ns BIGINT ns (call duration), name VARCHAR (cudaDeviceSynchronize |
--   cudaStreamSynchronize), correlation_id BIGINT, nsys_rule VARCHAR ('cuda-sync-api')
-- Definition: every cuda_api row named cudaDeviceSynchronize or cudaStreamSynchronize (ABI suffix
--   already stripped at ingest), as in nsys 2022.4 `cuda-sync-api`. nsys prints the 50 longest;
--   this view lists all of them (order by duration_ns DESC to compare).
-- columns: rank, tid, start_ns, end_ns, duration_ns, name, correlation_id, nsys_rule
-- stage: rank
-- result: stored
-- requires: cuda_api, sync
CREATE OR REPLACE VIEW diag_sync_api_calls AS
SELECT rank, tid, start_ns, end_ns, end_ns - start_ns AS duration_ns, name, correlation_id,
       'cuda-sync-api' AS nsys_rule
FROM cuda_api
WHERE name IN ('cudaDeviceSynchronize', 'cudaStreamSynchronize');
