-- The statements of the export package's shared pieces (nsight_analyze/export/__init__.py).

-- name: workspace_ranks
SELECT rank FROM ranks ORDER BY rank
