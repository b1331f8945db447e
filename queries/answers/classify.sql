-- The statements of kernel classification (nsight_analyze/classify.py).

-- name: pattern_check
-- Whether RE2 accepts a rule's pattern ($pattern: its SQL literal); an error says why not.
SELECT regexp_matches('', $pattern)

-- name: no_rule_index
-- The rule index of every name when there are no rules.
CAST(NULL AS INTEGER)

-- name: rule_when
-- One branch of the CASE giving the index of the first rule matching $column.
WHEN regexp_matches($column, $pattern) THEN $index

-- name: rule_index
-- The index of the first rule matching (NULL: no rule); $whens: the rules' branches, in order.
CASE $whens END

-- name: rule_row
-- One rule as a row of the inline rules table (rule_idx, category, subcategory, rule).
($index, $category, $subcategory, $origin)

-- name: rules_values
-- The rules as an inline VALUES table; $rows: their rule_rows.
(VALUES $rows)

-- name: no_rules
-- The inline rules table when there are no rules: the same four columns, no row.
(SELECT NULL::INTEGER, NULL::VARCHAR, NULL::VARCHAR, NULL::VARCHAR WHERE false)

-- name: name_map_cache
-- TEMP: the names this connection classified, per rule set ($cache: its name).
CREATE TEMP TABLE IF NOT EXISTS $cache (rules VARCHAR, name VARCHAR, category VARCHAR, subcategory VARCHAR, rule VARCHAR)

-- name: fresh_names
-- The distinct names of $names (a query with a `name` column) not yet classified with the rule
-- set $key.
CREATE OR REPLACE TEMP TABLE _name_map_fresh AS
SELECT DISTINCT name FROM ($names) AS s
WHERE NOT EXISTS (SELECT 1 FROM $cache AS c
                  WHERE c.rules = $key AND c.name IS NOT DISTINCT FROM s.name)

-- name: classify_fresh_names
-- The fresh names classified in one regex pass ($rule_index over the name, joined to the
-- inline $rules table), kept in the cache under the rule set $key.
INSERT INTO $cache
WITH m AS (SELECT name, $rule_index AS rule_idx
           FROM _name_map_fresh)
SELECT $key, m.name, coalesce(r.category, 'other') AS category, r.subcategory, r.rule
FROM m LEFT JOIN $rules r(rule_idx, category, subcategory, rule) USING (rule_idx)

-- name: name_map
-- TEMP TABLE $table: the classification of each distinct name of $names under the rule set $key.
CREATE OR REPLACE TEMP TABLE $table AS
SELECT c.name, c.category, c.subcategory, c.rule
FROM $cache AS c
WHERE c.rules = $key
  AND EXISTS (SELECT 1 FROM ($names) AS s WHERE s.name IS NOT DISTINCT FROM c.name)

-- name: classify_input
-- The names classify_names was given, one row each.
CREATE OR REPLACE TEMP TABLE _classify_input AS SELECT unnest(?::VARCHAR[]) AS name

-- name: input_names
SELECT name FROM _classify_input

-- name: store_user_rules
-- The user's rules (key, CSV text, description) kept in settings for later ingests.
INSERT OR REPLACE INTO settings VALUES (?, ?, ?)

-- name: unclassified_share
-- The unclassified share of kernel time, from $rows: the stored per-rank kernel totals
-- (kernel_summary_times: no pass over the kernels) or `kernels` where the workspace has no
-- analysis yet (kernel_times).
SELECT 100.0 * sum(t) FILTER (WHERE category = 'other') / nullif(sum(t), 0) AS pct,
       count(DISTINCT name) FILTER (WHERE category = 'other') AS names
FROM ($rows)

-- name: kernel_summary_times
SELECT name, category, total_ns AS t FROM kernel_summary

-- name: kernel_times
SELECT name, category, end_ns - start_ns AS t FROM kernels

-- name: stamp_rules
-- The built-in rules the kernels were classified with ($digest: their sha256, a SQL literal).
INSERT OR REPLACE INTO meta VALUES ('classified_with', $digest)

-- name: unclassified_kernels
-- The kernels a source loaded without classifying them.
category IS NULL

-- name: kernel_names
-- The names of the kernels matching $where (the short name where the demangled one is missing).
SELECT coalesce(name, short_name) AS name FROM kernels WHERE $where

-- name: fresh_kernels
CREATE OR REPLACE TEMP TABLE _fresh_kernels AS SELECT * FROM kernels WHERE $where

-- name: delete_fresh_kernels
DELETE FROM kernels WHERE $where

-- name: insert_classified_kernels
-- The kernels moved out (_fresh_kernels) back in, with their names' categories (_fresh_map).
INSERT INTO kernels
SELECT k.* REPLACE (coalesce(m.category, 'other') AS category, m.subcategory AS subcategory)
FROM _fresh_kernels k LEFT JOIN _fresh_map m ON m.name = coalesce(k.name, k.short_name)
