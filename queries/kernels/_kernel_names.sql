-- _kernel_names: a number for each distinct kernel name of the rank batch.
-- Why: a window or ASOF join sorts every column it carries, and sorting strings is several times
--   slower than sorting numbers (kernel_chains' window over 8 ranks x 200k kernels: 1.13 s with
--   the names, 0.80 s with ids); queries carry name_id and turn it back into names at the end.
-- Columns: name_id BIGINT (1, 2, ... in name order), name VARCHAR,
--   short_name VARCHAR (NULL when the trace has none; the least one where a name has several),
--   display_name VARCHAR (short name, else name).
-- One id per name, not per (name, short name): what groups by name_id groups by name, as the
--   queries did when they carried the names.
-- stage: rank
-- result: step
-- requires: kernels
CREATE OR REPLACE VIEW _kernel_names AS
-- ordered: the same ids wherever the view is read (a step table in the rank stage, a view elsewhere)
SELECT row_number() OVER (ORDER BY name) AS name_id, name, short_name,
       coalesce(short_name, name) AS display_name
FROM (SELECT name, min(short_name) AS short_name FROM kernels GROUP BY name);
