-- The statements of the two analysis steps (nsight_analyze/analysis/steps.py).

-- name: ranks_view
-- A TEMP view named $name showing only the rows of the ranks $ranks (an IN-list) of $source: a
-- batch's canonical rows (the rank-local step's input), or its rows of a stored or staged result.
CREATE OR REPLACE TEMP VIEW "$name" AS SELECT * FROM $source WHERE rank IN ($ranks)
