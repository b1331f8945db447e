-- The statements of the analysis plan (nsight_analyze/analysis/plan.py): the stamps and what is stale.

-- name: workspace_objects
-- {name: 'table' | 'view'} of the workspace's main schema (not TEMP objects).
SELECT table_name, 'table' FROM duckdb_tables()
WHERE NOT temporary AND database_name = current_database() AND schema_name = 'main'
UNION ALL SELECT view_name, 'view' FROM duckdb_views()
WHERE NOT temporary AND database_name = current_database() AND NOT internal AND schema_name = 'main'

-- name: settings_text
-- Every setting as key=value, in key order (part of the global stamp).
SELECT coalesce(string_agg(key || '=' || coalesce(value, ''), chr(31) ORDER BY key), '')
FROM settings

-- name: rank_identities
-- A hash of every rank's number, file content hash and source (part of the row totals).
SELECT md5(coalesce(string_agg(k.rank || ':' || coalesce(f.sha256, '') || ':' ||
coalesce(k.rank_source, ''), ',' ORDER BY k.rank), ''))
FROM ranks k LEFT JOIN files f ON f.file_id = k.file_id

-- name: table_totals
-- The row total of each counted table ($totals: table_total pieces, or 1 when none is present).
SELECT $totals

-- name: table_total
(SELECT count(*) FROM $table)

-- name: held_rank_counts
-- Per rank: its row counts and events as the last analysis counted them ($state: the state table).
SELECT rank, counts AS cs, events AS n FROM $state

-- name: rank_rows_of_table
-- Per rank: its rows of the counted table $table.
SELECT rank, '$table' AS t, count(*) AS n FROM $table GROUP BY rank

-- name: no_rank_rows
-- The rows of rank_rows_of_table when no counted table is present.
SELECT NULL::INTEGER AS rank, NULL AS t, NULL::BIGINT AS n

-- name: rank_counts
-- Per rank: its row counts per table as text, and its events ($per: rank_rows_of_table pieces).
SELECT rank, string_agg(t || ':' || n, ',' ORDER BY t) AS cs, sum(n) AS n
FROM ($per) GROUP BY rank

-- name: rank_fingerprints
-- Per rank (of `ranks` or with counted rows): the hash of its file's content hash, its source and
-- its row counts; its events; its row counts ($counts: held_rank_counts or rank_counts).
WITH c AS ($counts),
     r AS (SELECT rank FROM ranks UNION SELECT rank FROM c WHERE rank IS NOT NULL)
SELECT r.rank,
       md5(coalesce(any_value(f.sha256), '') || '|' || coalesce(any_value(k.rank_source), '')
           || '|' || coalesce(any_value(c.cs), '')),
       coalesce(any_value(c.n), 0)::BIGINT, coalesce(any_value(c.cs), '')
FROM r LEFT JOIN ranks k ON k.rank = r.rank LEFT JOIN files f ON f.file_id = k.file_id
LEFT JOIN c ON c.rank = r.rank
GROUP BY r.rank ORDER BY r.rank

-- name: rankless_files
-- The content hashes of the files that own no rank (in the job stamp): a recipe output read
-- beside its reports' ranks feeds job results too.
SELECT coalesce(string_agg(sha256, ',' ORDER BY sha256), '') FROM files AS f
WHERE coalesce(f.status, 'ok') = 'ok'
AND NOT EXISTS (SELECT 1 FROM ranks AS r WHERE r.file_id = f.file_id)

-- name: owned_rows
-- The rows of a job result that the jobs or ranks $ids own ($owner: its `job` or `rank` column).
$owner IN ($ids)
