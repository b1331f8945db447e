-- The statements of the `corrupt-timing` capture finding (nsight_analyze/rules/corrupt_timing.py).

-- name: corrupt_timing_warnings
-- The ingest's CORRUPT_TIMING warnings ($corrupt_timing: summary.CORRUPT_TIMING_SQL), without
-- their prefix (the warning's text from character $cut on).
SELECT path, ranks, substr(warning, $cut) AS warning FROM ($corrupt_timing)
