-- The statements of the `excessive-sync` finding (nsight_analyze/rules/synchronisation.py).

-- name: sync_api_calls
-- cudaDeviceSynchronize / cudaStreamSynchronize calls, longest first (nsys cuda-sync-api).
SELECT rank, tid, start_ns, duration_ns, name FROM diag_sync_api_calls
ORDER BY duration_ns DESC, rank, start_ns, tid, name

-- name: sync_copies
-- The host-blocking copies and memsets one nsys rule ($rule: cuda-sync-memcpy, cuda-async-memcpy
-- or cuda-sync-memset) lists, longest first; synchronous HtoD copies of at most $htod bytes are
-- not flagged.
SELECT rank, device_id, stream_id, start_ns, duration_ns, kind, bytes, src_kind, dst_kind,
       api_name, api_start_ns, api_duration_ns
FROM diag_sync_copies(htod_min_bytes := $htod) WHERE nsys_rule = '$rule'
ORDER BY duration_ns DESC, rank, start_ns, device_id, stream_id, api_start_ns,
         api_duration_ns, api_name

-- name: flagged_ranks
-- The ranks with a call or copy an nsys rule lists.
SELECT DISTINCT rank FROM (SELECT rank FROM diag_sync_api_calls UNION ALL
SELECT rank FROM diag_sync_copies(htod_min_bytes := $htod)) ORDER BY rank

-- name: blocked_ns
-- The host time blocked in the synchronising calls ($calls: sync_calls, every synchronising call,
-- CUDA or HIP, explicit or a synchronous copy; or diag_sync_api_calls where it is missing).
SELECT coalesce(sum(duration_ns), 0) FROM $calls

-- name: call_count
SELECT count(*) FROM $calls
