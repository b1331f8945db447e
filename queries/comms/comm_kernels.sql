-- comm_kernels: every NCCL kernel with its communicator identity, process group and exposed time.
-- Why: communication by parallelism dimension (comm_groups) groups kernels by communicator and
-- needs, per kernel, how much of it ran with no other GPU work (exposed); both are rank-local,
-- so they are computed once per rank here and the job step only groups.
-- Columns:
--   rank INTEGER, correlation_id BIGINT, stream_id BIGINT, start_ns, end_ns, duration_ns BIGINT ns
--     (file clock), op VARCHAR, comm VARCHAR, key_source VARCHAR, comm_size INTEGER, bytes BIGINT,
--     peer INTEGER: as in merge_nccl_kernels (bytes: the payload's, else Kineto's in_bytes; comm =
--     NCCL's communicator id from the payload, or
--     'stream<i>' without one)
--   exposed_ns          BIGINT  ns of the kernel during which the rank runs no compute, memory or
--                               other operation (its overlap with _tp_comm_exposed_segments)
--   kineto_collective   VARCHAR PyTorch's collective name (kineto_collectives), NULL without Kineto
--   pg_name, pg_desc    VARCHAR PyTorch process group of the kernel (kineto_collectives), NULL without
--   pg_ranks            INTEGER[] its global ranks: the kernel's own "Process Group Ranks", else the
--                               group's distributedInfo.pg_config entry (kineto_process_groups)
--   pg_size             INTEGER ranks in that process group (pg_config, else "Group size")
-- columns: rank, correlation_id, stream_id, start_ns, end_ns, duration_ns, op, comm, key_source, comm_size, bytes, peer, exposed_ns, kineto_collective, pg_name, pg_desc, pg_ranks, pg_size
-- stage: rank
-- result: stored
-- requires: merge_nccl_kernels, _tp_comm_exposed_segments, _exposed_at, kineto_collectives, kineto_process_groups
CREATE OR REPLACE VIEW comm_kernels AS
WITH ck_pts AS (  -- the rank's exposed time before each kernel's start (k = 0) and end (k = 1)
    SELECT k.rank, k.correlation_id, k.start_ns, k.end_ns, p.k,
           CASE WHEN p.t IS NOT NULL  -- no end: no exposed time
                THEN _exposed_at(p.t, s.exposed_before_ns, s.start_ns, s.end_ns) END AS before_t
    FROM merge_nccl_kernels AS k
    CROSS JOIN LATERAL (SELECT unnest([0, 1]) AS k, unnest([k.start_ns, k.end_ns]) AS t) AS p
    ASOF LEFT JOIN _tp_comm_exposed_segments AS s ON s.rank = k.rank AND p.t >= s.start_ns
),
ck_exp AS (
    SELECT rank, correlation_id, start_ns, end_ns,
           max(before_t) FILTER (WHERE k = 1) - max(before_t) FILTER (WHERE k = 0) AS exposed_ns
    FROM ck_pts
    GROUP BY ALL
),
ck_kc AS (
    SELECT rank, correlation_id, ANY_VALUE(collective) AS collective, ANY_VALUE(pg_name) AS pg_name,
           ANY_VALUE(pg_desc) AS pg_desc, ANY_VALUE(pg_ranks) AS pg_ranks, MAX(group_size) AS group_size,
           MAX(in_bytes) AS in_bytes
    FROM kineto_collectives
    GROUP BY rank, correlation_id
),
ck_pg AS (
    SELECT rank, pg_name, ANY_VALUE(pg_ranks) AS pg_ranks, MAX(pg_size) AS pg_size
    FROM kineto_process_groups
    GROUP BY rank, pg_name
)
SELECT
    k.rank, k.correlation_id, k.stream_id, k.start_ns, k.end_ns, k.duration_ns, k.op, k.comm, k.key_source,
    k.comm_size, COALESCE(k.bytes, kc.in_bytes)::BIGINT AS bytes, k.peer,
    COALESCE(e.exposed_ns, 0)::BIGINT AS exposed_ns,
    kc.collective AS kineto_collective,
    kc.pg_name,
    kc.pg_desc,
    COALESCE(kc.pg_ranks, g.pg_ranks)::INTEGER[] AS pg_ranks,
    COALESCE(g.pg_size, kc.group_size)::INTEGER AS pg_size
FROM merge_nccl_kernels AS k
LEFT JOIN ck_exp AS e ON e.rank = k.rank AND e.correlation_id IS NOT DISTINCT FROM k.correlation_id
    AND e.start_ns = k.start_ns AND e.end_ns = k.end_ns
LEFT JOIN ck_kc AS kc ON kc.rank = k.rank AND kc.correlation_id = k.correlation_id
LEFT JOIN ck_pg AS g ON g.rank = k.rank AND g.pg_name = kc.pg_name;
