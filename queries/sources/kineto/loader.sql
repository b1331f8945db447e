-- The statements of one Kineto file's load after its pass (nsight_analyze/sources/kineto/loader.py).

-- name: insert_collectives
-- The file's collectives (its TEMP table $tmp) into kineto_collectives of rank $rank: an NCCL
-- kernel with its own args ('kernel-args'), else the first record_param_comms op of its External
-- id; bytes per element from the dtype ($dtypes, $dtype_bytes: batches.DTYPE_BYTES as two lists).
INSERT INTO kineto_collectives
WITH ops AS (
    SELECT * FROM $tmp WHERE kind = 'cpu_op' AND external_id IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY external_id ORDER BY collective) = 1
),
k AS (SELECT * FROM $tmp WHERE kind = 'kernel'),
m AS (
    SELECT k.correlation_id, k.external_id, k.stream_id, k.start_ns, k.end_ns, k.kernel_name,
           CASE WHEN k.collective IS NOT NULL THEN 'kernel-args' ELSE 'record_param_comms' END
               AS source,
           CASE WHEN k.collective IS NOT NULL THEN k ELSE ops END AS a
    FROM k LEFT JOIN ops ON k.collective IS NULL AND ops.external_id = k.external_id
    WHERE k.collective IS NOT NULL OR ops.collective IS NOT NULL
)
SELECT $rank, correlation_id, external_id, stream_id, start_ns, end_ns, kernel_name,
       a.collective, a.dtype, d.bytes, a.in_nelems, a.out_nelems,
       a.in_nelems * d.bytes, a.out_nelems * d.bytes, a.in_split_size, a.out_split_size,
       a.group_size, a.pg_name, a.pg_desc, TRY_CAST(a.pg_ranks AS INTEGER[]), source, a.seq
FROM m LEFT JOIN (SELECT unnest($dtypes::VARCHAR[]) AS dtype,
                         unnest($dtype_bytes::INTEGER[]) AS bytes) d
  ON d.dtype = a.dtype

-- name: insert_threads
-- The named threads of the file (its TEMP table ${tmp}_threads) into threads of rank $rank, when
-- the host process is unknown.
INSERT INTO threads SELECT DISTINCT $rank, tid, name FROM ${tmp}_threads

-- name: insert_host_threads
-- The same, of the host process $pid only.
INSERT INTO threads SELECT DISTINCT $rank, tid, name FROM ${tmp}_threads WHERE pid = $pid

-- name: insert_profiler_ranges
-- CUPTI range-profiler kernels of rank $rank in time order (range_id), with their counters ($ops).
INSERT INTO kineto_profiler_ranges (rank, range_id, name, start_ns, end_ns, $ops)
SELECT $rank, (row_number() OVER (ORDER BY start_ns, end_ns, name) - 1)::INTEGER,
       name, start_ns, end_ns, $ops
FROM ${tmp}_ranges

-- name: joinable_ranges
-- The profiler ranges, those that have a kernel of the same name and order on rank $rank, those
-- without a kernel name (__missing__), and the rank's kernels.
WITH p AS (SELECT name, row_number() OVER (PARTITION BY name ORDER BY start_ns, end_ns) AS i
           FROM ${tmp}_ranges),
     k AS (SELECT name, count(*) AS n FROM kernels WHERE rank = $rank GROUP BY name)
SELECT count(*), count(*) FILTER (WHERE p.i <= k.n),
       count(*) FILTER (WHERE p.name = '__missing__'),
       (SELECT count(*) FROM kernels WHERE rank = $rank)
FROM p LEFT JOIN k USING (name)

-- name: insert_process_groups
INSERT INTO kineto_process_groups VALUES (?, ?, ?, ?, ?, ?, ?)

-- name: insert_versions
-- The versions' rows ($rows: a VALUES list, no bound parameter).
INSERT INTO kineto_versions VALUES $rows

-- name: insert_gpus
INSERT INTO gpus VALUES $rows

-- name: insert_ncu_peaks
INSERT INTO ncu_peaks VALUES (?, ?, ?, ?, ?, ?)

-- name: collective_count
SELECT count(*) FROM kineto_collectives WHERE rank = $rank
