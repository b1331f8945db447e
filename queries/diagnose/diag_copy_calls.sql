-- diag_copy_calls: every memory operation on the GPU timeline with the API call that issued it.
-- Why: the synchronisation rule (diag_sync_copies: nsys cuda-sync-memcpy, cuda-async-memcpy,
--   cuda-sync-memset) judges each copy by its call; pairing them once here means diagnose never
--   joins the job's memops against all its API calls at read time.
-- Columns: rank INTEGER, device_id INTEGER, stream_id BIGINT, start_ns BIGINT ns,
--   duration_ns BIGINT ns, end_ns BIGINT ns, kind VARCHAR (memops.kind), bytes BIGINT B,
--   src_kind, dst_kind VARCHAR, api_name VARCHAR (the issuing call), api_start_ns BIGINT ns,
--   api_duration_ns BIGINT ns, tid BIGINT, correlation_id BIGINT.
-- Definition: memops with start_ns > 0 joined to the cuda_api row of the same rank and
--   correlation_id (memops without such a call are left out), except the copies of NCCL
--   copy-engine collectives (nccl_ce_copies): they are communication (gpu_ops' comms), whose wait
--   the comms analyses judge; a host-blocking or pageable-copy finding on NCCL's own memcpy would
--   tell the user to fix a copy they did not write. memop_summary still lists them (comms = true).
-- columns: rank, device_id, stream_id, start_ns, duration_ns, end_ns, kind, bytes, src_kind, dst_kind, api_name, api_start_ns, api_duration_ns, tid, correlation_id
-- stage: rank
-- result: stored
-- requires: memops, cuda_api, nccl_ce_copies
CREATE OR REPLACE VIEW diag_copy_calls AS
SELECT m.rank, m.device_id, m.stream_id, m.start_ns, m.end_ns - m.start_ns AS duration_ns,
       m.end_ns, m.kind, m.bytes, m.src_kind, m.dst_kind,
       a.name AS api_name, a.start_ns AS api_start_ns, a.end_ns - a.start_ns AS api_duration_ns,
       a.tid, m.correlation_id
FROM memops m
JOIN cuda_api a ON a.rank = m.rank AND a.correlation_id = m.correlation_id
ANTI JOIN nccl_ce_copies AS ce ON ce.rank = m.rank AND ce.correlation_id = m.correlation_id
WHERE m.start_ns > 0;
