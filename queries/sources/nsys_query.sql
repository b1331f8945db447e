-- The SQL pieces one file's INSERT ... SELECT statements are built from (nsight_analyze/sources/nsys_query.py).

-- name: abi_suffix
-- The versioned-ABI suffix of a CUDA API name (cudaLaunchKernel_v7000 -> cudaLaunchKernel).
'_v[0-9]{4,}$$'

-- name: column_of_row
-- A column of the event table's row x.
x."$column"

-- name: cast_to
CAST($expr AS $type)

-- name: string_value
$strings.value

-- name: insert_rows
INSERT INTO $target $select

-- name: row_count
SELECT count(*) FROM $table x

-- name: row_count_where
SELECT count(*) FROM $table x WHERE $condition

-- name: pid_of_tid
-- globalPid of a globalPid/globalTid column: the thread bits cleared.
(x."$column" // $divisor) * $divisor

-- name: code_label
-- One branch of a CASE naming a code ($code) of $column.
WHEN $column = $code THEN '$label'

-- name: enum_fallback
-- The built-in names ($whens: code_label branches), else "kind N".
CASE $whens ELSE 'kind ' || CAST($column AS VARCHAR) END

-- name: enum_label
-- The file's ENUM table's name for a code, else the built-in one.
COALESCE($pretty, $fallback)

-- name: ranked_rows
-- The rows of processes that are ranks, with their rank as m.rank.
FROM $table x JOIN $rank_map m ON m.global_pid = $pid

-- name: enum_pretty
-- ENUM names like CUDA_MEMCPY_KIND_HTOD / CUDA_MEMOPR_MEMORY_KIND_PINNED -> HtoD / Pinned.
CASE
    WHEN $name_col LIKE 'CUDA_MEMCPY_KIND_%' THEN
        CASE regexp_extract($name_col, 'CUDA_MEMCPY_KIND_(\w+)', 1)
            WHEN 'HTOD' THEN 'HtoD' WHEN 'DTOH' THEN 'DtoH'
            WHEN 'HTOA' THEN 'HtoA' WHEN 'ATOH' THEN 'AtoH'
            WHEN 'ATOA' THEN 'AtoA' WHEN 'ATOD' THEN 'AtoD'
            WHEN 'DTOA' THEN 'DtoA' WHEN 'DTOD' THEN 'DtoD'
            WHEN 'HTOH' THEN 'HtoH' WHEN 'PTOP' THEN 'PtoP' WHEN 'UNKNOWN' THEN 'Unknown'
            ELSE NULL END
    WHEN $label_col IS NOT NULL AND $name_col LIKE 'CUDA_MEMOPR_MEMORY_KIND_%' THEN $label_col
    ELSE NULL END

-- name: string_join
-- the StringIds row of an id column, joined to the row (x) as $alias
LEFT JOIN $strings $alias ON $alias.id = x."$column"

-- name: enum_join
-- the file's ENUM table's row of a value, joined as $alias (its labels win over the built-in names)
LEFT JOIN $enum $alias ON $alias.id = $column
