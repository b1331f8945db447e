-- The statements of the ingest's choice of inputs (nsight_analyze/ingest/inputs.py).

-- name: loaded_formats
-- The source formats of the ranks the workspace holds (one job, one profiler).
SELECT DISTINCT source_format FROM files JOIN ranks USING (file_id)

-- name: taken_ranks
-- The rank numbers the workspace holds, with their file's path and id.
SELECT r.rank, f.path, f.file_id FROM ranks r JOIN files f USING (file_id)
