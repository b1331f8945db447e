-- The statements of the `input-stall` finding (nsight_analyze/rules/input_stall.py).

-- name: host_bound_total
-- Host-bound idle over every window: GPU idle while the host ran other code.
SELECT coalesce(sum(host_bound_ns), 0) FROM diag_windows

-- name: input_stall_total
SELECT coalesce(sum(input_stall_ns), 0) FROM diag_windows

-- name: pageable_htod_copies
-- HtoD copies from (or to) pageable memory: input batches not pinned.
SELECT count(*) FROM memops WHERE kind = 'HtoD' AND (src_kind = 'Pageable' OR dst_kind = 'Pageable')
