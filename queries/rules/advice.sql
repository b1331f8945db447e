-- The statements of the fixes by kernel family (nsight_analyze/rules/advice.py).

-- name: family
-- advice.family in SQL on two columns ($category, $subcategory), the same mapping:
-- $subcategory_families holds one family_of_subcategory per subcategory of _FAMILY_OF_SUB.
CASE WHEN lower($category) = 'comms' THEN 'comms' $subcategory_families
WHEN lower($category) = 'compute' THEN 'compute' WHEN lower($category) = 'memory'
THEN 'elementwise' ELSE 'other' END

-- name: family_of_subcategory
-- The family ($family) of one name-rule subcategory ($sub) in column $subcategory.
WHEN lower($subcategory) = '$sub' THEN '$family'

-- name: memop_family
-- memops by kind -> family (PtoP copies are communication).
CASE WHEN kind IN ('HtoD', 'DtoH') THEN 'transfer' WHEN kind = 'PtoP' THEN 'comms' ELSE 'copy' END

-- name: name_precision
-- The gemm_precision of one kernel name ($literal: an SQL string literal).
SELECT gemm_precision($literal)

-- name: fullest_rank
-- The rank with the fullest device memory (queries/partition/memory_peak.sql), its peak, its
-- GPU's capacity and the number of ranks with memory events.
SELECT rank, peak_bytes_in_use, peak_bytes_reserved, capacity_bytes, capacity_source,
       (SELECT count(DISTINCT rank) FROM memory_peak)
FROM memory_peak ORDER BY used_pct DESC NULLS LAST, peak_bytes_in_use DESC LIMIT 1
