-- The statements of the Kineto fast path's SQL (nsight_analyze/sources/kineto/duck_json.py): DuckDB's
-- JSON reader on one piece of the traceEvents array -> one wide row per event.

-- name: k_int_macro
-- events.to_int: an integer literal, or an integral float literal
-- (the reader writes a float with a '.', or with an exponent when too large for BIGINT)
CREATE MACRO k_int(v) AS CASE WHEN NOT contains(v, '.') THEN TRY_CAST(v AS BIGINT)
WHEN TRY_CAST(v AS DOUBLE) = floor(TRY_CAST(v AS DOUBLE))
THEN TRY_CAST(TRY_CAST(v AS DOUBLE) AS BIGINT) END

-- name: k_digits_macro
-- µs text '-?digits(.d{1,3})?' -> exact ns, in integers (DuckDB's DECIMAL casts are slow)
CREATE MACRO k_digits(t) AS TRY_CAST(TRY_CAST(replace(t, '.', '') AS HUGEINT) * CASE
WHEN NOT contains(t, '.') THEN 1000 WHEN length(t) - strpos(t, '.') = 1 THEN 100
WHEN length(t) - strpos(t, '.') = 2 THEN 10 ELSE 1 END AS BIGINT)

-- name: k_ns_macro
-- a JSON number written back by the reader -> exact ns; NULL when it is not a number, or
-- when the double may not be the literal (> 15 significant digits, > 3 decimals, exponent)
CREATE MACRO k_ns(v) AS CASE WHEN contains(v, 'e') OR contains(v, 'E') THEN NULL
WHEN NOT contains(v, '.') OR (length(v) - strpos(v, '.') <= 3
AND length(v) - starts_with(v, '-')::INT <= 16) THEN k_digits(v) END

-- name: k_ns_raw_macro
-- raw mode: t is the literal cut from the event's text, v the reader's value of the same key;
-- when they disagree the regex met a nested key of that name first: fall back to the double
CREATE MACRO k_ns_raw(t, v) AS CASE WHEN v IS NULL OR contains(v, '"') OR TRY_CAST(v AS DOUBLE) IS NULL
THEN NULL WHEN TRY_CAST(t AS DOUBLE) IS DISTINCT FROM TRY_CAST(v AS DOUBLE)
THEN round(TRY_CAST(v AS DOUBLE) * 1000)::BIGINT
WHEN regexp_full_match(t, '-?[0-9]+(\.[0-9]{1,3})?') THEN k_digits(t)
ELSE TRY_CAST(round_even(TRY_CAST(t AS DECIMAL(38, 15)) * 1000, 0) AS BIGINT) END

-- name: fast_source
-- The events of piece $src (its path as a string literal) as read_json reads them: the fields of
-- $columns (duck_json.EVENT_FIELDS and ARG_FIELDS) with ts and dur in exact ns; `lossy` when a
-- number's double may not be its literal (the piece is then read again by raw_source).
SELECT true AS is_obj, ph, cat, name, pid::VARCHAR AS pid, tid::VARCHAR AS tid, args AS a, k_ns(ts::VARCHAR) AS ts_ns, k_ns(dur::VARCHAR) AS dur_ns,
       (ts_ns IS NULL AND TRY_CAST(ts::VARCHAR AS DOUBLE) IS NOT NULL)
       OR (dur_ns IS NULL AND TRY_CAST(dur::VARCHAR AS DOUBLE) IS NOT NULL) AS lossy
FROM read_json($src, format = 'array', compression = 'uncompressed', columns = $columns)

-- name: raw_source
-- The events of piece $src in raw mode: each entry's text kept (any JSON value, `is_obj` when it is
-- an object), its fields by json_transform ($structure), ts and dur from their literals cut from the
-- text ($ts_number, $dur_number: raw_number).
SELECT starts_with(ltrim(raw), '{') AS is_obj, ph, cat, name, pid::VARCHAR AS pid, tid::VARCHAR AS tid, args AS a,
       k_ns_raw($ts_number, ts::VARCHAR) AS ts_ns,
       k_ns_raw($dur_number, dur::VARCHAR) AS dur_ns, false AS lossy
FROM (SELECT raw, unnest(json_transform(raw, $structure))
      FROM (SELECT json AS raw
            FROM read_json_objects($src, format = 'array', compression = 'uncompressed')))

-- name: raw_number
-- The numeric literal of key $key in an event's text `raw`.
regexp_extract(raw, '"$key"\s*:\s*(-?[0-9][0-9.eE+-]*)', 1)

-- name: events
-- One wide row per event of $source (fast_source or raw_source): `target`, the row set it feeds
-- ($kernel .. $shape: duck_json's codes), or `skipped` why none, and the columns of every row set
-- (split() takes each one's). $sync_kinds: the cuda_sync kinds' WHEN branches (sync_kind_case).
WITH e AS (
    $source
),
k AS (
    SELECT *,
        CASE WHEN NOT is_obj THEN NULL
             WHEN cat = 'kernel' THEN $kernel
             WHEN cat IN ('gpu_memcpy', 'gpu_memset') THEN $memop
             WHEN cat IN ('cuda_runtime', 'cuda_driver') THEN $api
             WHEN cat = 'cuda_sync' THEN $sync
             WHEN cat = 'user_annotation'
                  OR (cat = 'cpu_op' AND starts_with(name, 'ProfilerStep#')
                      AND regexp_matches(name, '^ProfilerStep#[0-9]')) THEN $nvtx
             WHEN cat = 'gpu_user_annotation' THEN $gpu_ann
             WHEN cat = 'cpu_op' THEN CASE WHEN name = 'record_param_comms'
                                             AND a."Collective name" IS NOT NULL THEN $comm_op
                                        WHEN regexp_matches(name, $shape_ops)
                                             AND a."Input Dims" IS NOT NULL AND ts_ns IS NOT NULL
                                             AND dur_ns IS NOT NULL THEN $shape END
             WHEN ph = 'M' AND name = 'thread_name' THEN $thread
             WHEN cat = 'cpu_instant_event' AND name = '[memory]'
                  AND k_int(a."Device Type"::VARCHAR) = $cuda_device_type THEN $memory
             WHEN cat = 'cuda_profiler_range' THEN $range END AS handler,
        CASE WHEN cat = 'kernel' THEN TRY_CAST(a.grid AS JSON[]) END AS grid,
        CASE WHEN cat = 'kernel' THEN TRY_CAST(a.block AS JSON[]) END AS block
    FROM e
),
b AS (
    SELECT *,
        coalesce((handler BETWEEN $kernel AND $gpu_ann OR handler = $range)
                 AND (ts_ns IS NULL OR dur_ns IS NULL)
                 OR (handler = $memory AND ts_ns IS NULL), false) AS bad
    FROM k
),
t AS (SELECT *, CASE WHEN bad THEN NULL ELSE handler END AS target FROM b)
SELECT target, bad, lossy,
    CASE WHEN NOT is_obj THEN 'non-object entries'
         WHEN cat = 'cpu_op' THEN CASE WHEN handler IS DISTINCT FROM $nvtx
                                        AND handler IS DISTINCT FROM $shape THEN 'cpu_op' END
         WHEN cat IN ($handled) THEN NULL
         WHEN ph = 'M' THEN CASE WHEN name IS DISTINCT FROM 'thread_name' THEN 'metadata (ph M)' END
         WHEN cat = 'cpu_instant_event' AND name = '[memory]' THEN
             CASE WHEN handler IS DISTINCT FROM $memory THEN '[memory] of a non-CUDA device' END
         ELSE coalesce(nullif(cat, ''), 'ph ' || coalesce(ph, 'None')) END AS skipped,
    target = $kernel AND (a."Collective name" IS NOT NULL OR contains(name, 'nccl')) AS is_comm,
    CASE WHEN target IN ($kernel, $gpu_ann) THEN coalesce(k_int(a.device::VARCHAR), k_int(pid))
         WHEN target IN ($memop, $sync) THEN k_int(a.device::VARCHAR)
         WHEN target = $memory THEN k_int(a."Device Id"::VARCHAR) END AS device_id,
    CASE WHEN target IN ($kernel, $memop, $sync) THEN k_int(a.stream::VARCHAR)
         WHEN target = $gpu_ann THEN k_int(tid) END AS stream_id,
    CASE WHEN target <= $gpu_ann OR target IN ($memory, $range, $shape) THEN ts_ns END AS start_ns,
    CASE WHEN target <= $gpu_ann OR target IN ($range, $shape) THEN ts_ns + dur_ns END AS end_ns,
    CASE WHEN target <= $gpu_ann OR target IN ($range, $shape) THEN name
         WHEN target = $thread THEN a.name END AS name,
    CASE WHEN target = $memory THEN k_int(a."Total Allocated"::VARCHAR) END AS bytes_in_use,
    CASE WHEN target = $memory THEN k_int(a."Total Reserved"::VARCHAR) END AS bytes_reserved,
    $counters,
    CASE WHEN target IN ($kernel, $memop, $api, $sync) THEN k_int(a.correlation::VARCHAR) END
        AS correlation_id,
    $dims,
    CASE WHEN target = $kernel THEN k_int(a."registers per thread"::VARCHAR) END AS registers_per_thread,
    CASE WHEN target = $memop THEN k_int(a.bytes::VARCHAR) END AS bytes,
    CASE WHEN target IN ($api, $nvtx, $thread, $shape) THEN k_int(tid) END AS tid,
    CASE WHEN target = $thread THEN k_int(pid)
         WHEN target = $api AND regexp_full_match(pid, '-?[0-9]+') THEN k_int(pid) END AS pid,
    CASE WHEN target = $api THEN CASE cat WHEN 'cuda_runtime' THEN 'runtime' ELSE 'driver' END
         WHEN target = $sync THEN CASE coalesce(nullif(a.cuda_sync_kind, ''), name) $sync_kinds
                                       ELSE 'unknown' END END AS kind,
    CASE WHEN target IN ($gpu_ann, $comm_op, $shape) OR is_comm THEN k_int(a."External id"::VARCHAR) END
        AS external_id,
    CASE WHEN target = $shape THEN a."Input Dims"::VARCHAR END AS input_dims,
    CASE WHEN target = $shape THEN a."Input type"::VARCHAR END AS input_types,
    CASE WHEN target = $shape THEN a."Concrete Inputs"::VARCHAR END AS concrete_inputs,
    CASE WHEN target = $comm_op OR is_comm THEN struct_pack(
        collective := a."Collective name", dtype := a.dtype,
        in_nelems := k_int(a."In msg nelems"::VARCHAR), out_nelems := k_int(a."Out msg nelems"::VARCHAR),
        in_split_size := a."In split size", out_split_size := a."Out split size",
        group_size := k_int(a."Group size"::VARCHAR), pg_name := a."Process Group Name",
        pg_desc := a."Process Group Description", pg_ranks := a."Process Group Ranks",
        seq := k_int(a."Seq"::VARCHAR)) END AS comm
FROM t

-- name: sync_kind_case
-- A cuda_sync event's kind $kind (a string literal) -> the sync table's $label.
WHEN $kind THEN $label

-- name: range_counter
-- A CUPTI range-profiler counter of a cuda_profiler_range event: arg $metric as column $column.
CASE WHEN target = $range THEN k_int(a."$metric"::VARCHAR) END AS $column

-- name: launch_dim
-- A kernel's grid or block size ($arg) along $axis: element $index of the arg's list.
CASE WHEN target = $kernel THEN k_int($arg[$index]::VARCHAR) END AS ${arg}_$axis

-- name: target_code
$code::INTEGER AS code_$code

-- name: arrow_constants
-- The targets' codes ($codes: target_code each), the comm rows' kinds, a NULL name, FALSE and the
-- GPU-work codes, as one row whose values split() compares with.
SELECT $codes, 'kernel' AS kernel, 'cpu_op' AS cpu_op, NULL::VARCHAR AS no_name, FALSE AS no, [$kernel, $memop]::INTEGER[] AS gpu_work
