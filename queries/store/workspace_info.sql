-- The statements of `info`'s document: the workspace's files, jobs, ranks, spans, recipe outputs and sampled GPU metrics (nsight_analyze/store/workspace_info.py).

-- name: loaded
-- The files rows of loaded files (the others: failed, skipped or ignored), a condition the
-- statements below take as $loaded.
coalesce(status, 'ok') = 'ok'

-- name: loaded_file_column
-- (path, $column) of the loaded files, in file order.
SELECT path, $column FROM files WHERE $loaded ORDER BY file_id

-- name: job_rows
-- One row per job (ranks.job, set by the analysis' job step): ranks present and world size.
SELECT coalesce(job, 1) AS job, count(*) AS ranks, max(world_size) AS world_size,
       max(world_size) IS NULL OR count(*) >= max(world_size) AS complete,
       min(rank) AS first_rank, max(rank) AS last_rank,
       CASE WHEN max(world_size) IS NULL
            THEN count(*) || CASE WHEN count(*) = 1 THEN ' rank' ELSE ' ranks' END
                 || ' (world size unknown)'
            ELSE count(*) || ' of ' || max(world_size) || ' ranks' END AS label
FROM ranks GROUP BY ALL ORDER BY 1

-- name: recipe_rows
-- The Nsight Systems recipe outputs found in the loaded inputs (read or not), with the ranks
-- their rows went to.
SELECT o.file_id, o.output, o.recipe, o.status, o.rows_read,
       (SELECT list(DISTINCT p.rank ORDER BY p.rank) FROM recipe_nvtx_gpu_proj AS p
        WHERE p.file_id = o.file_id AND p.output = o.output) AS ranks,
       coalesce(o.reason, '') AS reason
FROM recipe_outputs AS o ORDER BY o.file_id, o.output

-- name: gpu_metric_files
-- Per file with sampled GPU metrics (nsys GPU metrics, DCGM): GPUs, metrics, samples, scrapes,
-- wall-clock span and the ranks the samples were matched to (docs/dcgm.md).
SELECT g.file_id, f.path, f.source_format AS format, coalesce(g.source, 'nsys') AS source,
       count(DISTINCT g.host) AS hosts,
       count(DISTINCT coalesce(g.gpu_uuid, g.host || ':' || g.gpu_id, g.gpu_id::VARCHAR))
           FILTER (WHERE g.gpu_instance IS NULL) AS gpus,
       count(DISTINCT g.gpu_instance) AS mig_instances,
       count(DISTINCT g.metric_name) AS metrics, count(*) AS samples,
       count(DISTINCT g.sample) AS scrapes,
       make_timestamp(min(g.utc_ns) // 1000) AS first_utc,
       make_timestamp(max(g.utc_ns) // 1000) AS last_utc,
       list(DISTINCT g.rank ORDER BY g.rank) FILTER (WHERE g.rank IS NOT NULL) AS ranks
FROM gpu_metrics g LEFT JOIN files f ON f.file_id = g.file_id AND $loaded
GROUP BY ALL ORDER BY g.file_id NULLS FIRST

-- name: loaded_files
-- The loaded files: format, versions and how many warnings and skipped tables each has.
SELECT file_id, path, source_format, nsys_version, schema_version, status,
       len(warnings) AS n_warnings, len(skipped) AS n_skipped
FROM files WHERE $loaded ORDER BY file_id

-- name: files_not_loaded
-- The files an ingest saw but did not load (failed, skipped or ignored), with the reason.
SELECT path, status, coalesce(array_to_string(warnings, '; '), '') AS reason, ingested_at
FROM files WHERE NOT $loaded ORDER BY file_id

-- name: rank_rows
-- One row per rank: its job, file, process, host, device and clock alignment.
SELECT rank, job, job_rank, file_id, pid, hostname, device_id, gpu_name, rank_source, world_size,
       clock_offset_ns, alignment_method
FROM ranks ORDER BY rank

-- name: event_spans
-- Each GPU operation's span (kernels and memory operations), for a workspace not yet analysed
-- (no tp_capture).
(SELECT rank, start_ns, end_ns FROM kernels UNION ALL SELECT rank, start_ns, end_ns FROM memops)

-- name: rank_spans
-- Per rank, the first and last time of $ops: tp_capture (the span over the GPU operations, stored
-- per rank) or event_spans.
SELECT rank, min(start_ns) AS first_ns, max(end_ns) AS last_ns FROM $ops GROUP BY rank ORDER BY rank
