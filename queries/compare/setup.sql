-- The statements of compare's setup and rank pairs (nsight_analyze/compare/setup.py).

-- name: catalog_tables
-- The stored results of catalog $catalog, each with its columns: which ones `relabel` can show.
SELECT table_name, list(column_name) FROM duckdb_columns()
WHERE database_name = '$catalog' AND schema_name = 'main' GROUP BY table_name

-- name: relabel_schema
CREATE SCHEMA IF NOT EXISTS memory."$schema"

-- name: relabel_view
-- The view $result of the relabel schema $schema over AFTER's stored result ($relabelled: one of
-- the three statements below).
CREATE OR REPLACE VIEW memory."$schema"."$result" AS $relabelled

-- name: relabel_unchanged
-- A stored result without a rank column: shown as it is ($table: AFTER's catalog.main.name).
SELECT * FROM $table

-- name: relabel_rank_column
-- A stored result whose rank column $column shows AFTER's paired ranks under BEFORE's numbers
-- ($after_ranks: AFTER's ranks, $before_ranks: the BEFORE rank of each, as lists) and its other
-- ranks as NULL.
SELECT * REPLACE (CAST(map($after_ranks, $before_ranks)["$column"] AS INTEGER) AS "$column")
FROM $table

-- name: relabel_paired_only
-- A per-rank verdict read without a rank filter ($relabelled): the paired ranks' rows only.
SELECT * FROM ($relabelled) WHERE rank IS NOT NULL

-- name: use_catalog
USE "$catalog"

-- name: gemm_precision
-- The precision of most of the GEMM time, names without a marker counted in the whole: a
-- precision read from a minority of the time is not the run's (unknown then).
SELECT p FROM (SELECT p, t, sum(t) OVER () AS whole FROM (
                   SELECT gemm_precision(name) AS p, sum(total_ns) AS t FROM kernel_summary
                   WHERE subcategory = 'gemm' AND rank IN ($ranks) GROUP BY p))
WHERE p IS NOT NULL AND t > whole / 2 ORDER BY t DESC, p LIMIT 1

-- name: tracer
-- A PyTorch-profiler trace's tracer ('cupti N', 'roctracer N', 'hip N' in files.nsys_version):
-- CUPTI ships with the CUDA toolkit the program ran with. An nsys export's version there is the
-- profiler's own, which says nothing of the run.
SELECT f.nsys_version FROM ranks r JOIN files f USING (file_id)
WHERE r.rank IN ($ranks) AND f.source_format = 'kineto-json'

-- name: gpu_names
SELECT coalesce(r.gpu_name, g.name) FROM ranks r LEFT JOIN gpus g
  ON g.rank = r.rank AND g.device_id IS NOT DISTINCT FROM r.device_id WHERE r.rank IN ($ranks)

-- name: world_sizes
SELECT r.world_size FROM ranks r WHERE r.rank IN ($ranks)

-- name: process_group_nccl_versions
-- kineto_versions holds the NCCL version whether or not the trace has pg_config; a workspace
-- made before that table has it in kineto_process_groups only.
SELECT r.nccl_version FROM kineto_process_groups r WHERE r.rank IN ($ranks)

-- name: versions
-- Each compared rank's recorded versions (kineto_versions, schema_kineto.sql).
SELECT rank, key, value FROM kineto_versions WHERE rank IN ($ranks) ORDER BY rank, key
