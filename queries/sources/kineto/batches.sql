-- The statements of the Kineto row sets' inserts (nsight_analyze/sources/kineto/batches.py).

-- name: rows_table
-- A batch's registered Arrow stream $name as a TEMP table, for an insert that reads its rows more
-- than once (a stream is read once).
CREATE TEMP TABLE ${name}_rows AS SELECT * FROM $name

-- name: insert_memops
-- Memcpy / memset rows of the batch $src into memops of rank $rank: kind, src and dst kinds parsed
-- from the name.
INSERT INTO memops (rank, device_id, stream_id, start_ns, end_ns, duration_ns, kind, bytes,
                    src_kind, dst_kind, correlation_id)
SELECT $rank, device_id, stream_id, start_ns, end_ns, end_ns - start_ns,
       CASE WHEN name LIKE 'Memset%' THEN 'memset'
            ELSE nullif(regexp_extract(name, '^Memcpy\s+(\w+)', 1), '') END,
       bytes,
       CASE WHEN name LIKE 'Memset%' THEN NULL
            ELSE nullif(trim(regexp_extract(name, '\(([^()]*?)\s*->', 1)), '') END,
       CASE WHEN name LIKE 'Memset%'
            THEN nullif(trim(regexp_extract(name, '\(([^()]*)\)', 1)), '')
            ELSE nullif(trim(regexp_extract(name, '->\s*([^()]*)\)', 1)), '') END,
       correlation_id
FROM $src

-- name: insert_api
-- CUDA runtime / driver calls into cuda_api, their names without a version suffix of 4+ digits
-- (cudaLaunchKernel_v7000).
INSERT INTO cuda_api (rank, tid, start_ns, end_ns, duration_ns, name, correlation_id,
                      return_value, api_class)
SELECT $rank, tid, start_ns, end_ns, end_ns - start_ns, regexp_replace(name, '_v[0-9]{4,}$$', ''),
       correlation_id, NULL, api_class
FROM $src

-- name: insert_sync
INSERT INTO sync (rank, device_id, stream_id, start_ns, end_ns, duration_ns, sync_type, event_id,
                  correlation_id)
SELECT $rank, device_id, stream_id, start_ns, end_ns, end_ns - start_ns, kind, NULL, correlation_id
FROM $src

-- name: insert_nvtx
-- user_annotation ranges and ProfilerStep#N as push/pop ranges of the domain 'pytorch'.
INSERT INTO nvtx (rank, tid, start_ns, end_ns, text, domain, event_type, payload)
SELECT $rank, tid, start_ns, end_ns, text, 'pytorch', 'push_pop', NULL FROM $src

-- name: insert_gpu_ann
INSERT INTO kineto_gpu_annotations
SELECT $rank, device_id, stream_id, start_ns, end_ns, text, external_id FROM $src

-- name: insert_comm
-- Collective kernels and record_param_comms ops into the file's TEMP table $tmp (the loader joins them).
INSERT INTO $tmp SELECT * FROM $src

-- name: insert_threads
INSERT INTO ${tmp}_threads SELECT * FROM $src

-- name: insert_memory
INSERT INTO memory_usage (rank, device_id, ts_ns, bytes_in_use, bytes_reserved, source)
SELECT $rank, device_id, ts_ns, bytes_in_use, bytes_reserved, 'kineto' FROM $src

-- name: insert_ranges
INSERT INTO ${tmp}_ranges SELECT * FROM $src

-- name: insert_shapes
INSERT INTO kineto_op_shapes (rank, tid, start_ns, end_ns, name, external_id, input_dims,
                              input_types, concrete_inputs)
SELECT $rank, tid, start_ns, end_ns, name, external_id, input_dims, input_types, concrete_inputs
FROM $src

-- name: kernel_names
-- The kernel names of the batch $src, classified once per distinct name (classify.build_name_map).
SELECT name FROM $src

-- name: insert_kernels
-- Kernels of the batch $src, classified by $names (build_name_map's table of their distinct
-- names), into kernels of rank $rank with their short names.
INSERT INTO kernels (rank, device_id, stream_id, start_ns, end_ns, duration_ns, name, short_name,
                     correlation_id, grid_x, grid_y, grid_z, block_x, block_y, block_z,
                     registers_per_thread, category, subcategory)
SELECT $rank, k.device_id, k.stream_id, k.start_ns, k.end_ns, k.end_ns - k.start_ns,
       k.name, m.short_name, k.correlation_id, k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y,
       k.block_z, k.registers_per_thread, coalesce(m.category, 'other'), m.subcategory
FROM $src AS k
LEFT JOIN (SELECT *, regexp_replace(regexp_replace(name, '^void\s+', ''), '[(<].*$$', '')
                     AS short_name
           FROM $names) AS m ON m.name = k.name

-- name: create_row_table
-- One of the file's TEMP tables of rows the parsers fill (`INSERT ... SELECT *`): $table, with
-- the columns of its row set's Arrow schema ($columns: batches.COMM_SCHEMA, THREAD_SCHEMA,
-- RANGE_SCHEMA), so that the two cannot differ.
CREATE TEMP TABLE $table ($columns)


-- name: delete_rank_rows
-- What the fast path loaded into canonical table $table for this rank (the rank's rows are only
-- this file's), forgotten when the ijson path loads the file instead.
DELETE FROM $table WHERE rank = ?

-- name: delete_all_rows
DELETE FROM $table
