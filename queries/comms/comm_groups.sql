-- comm_groups: per communicator (process group) of a job, its parallelism dimension and its cost.
-- Why: "which dimension's communication is exposed" decides the fix (TP: keep it in a node or
-- overlap it; DP: buckets, overlapped gradient reduction; PP: more micro-batches); the trace
-- knows communicators, collective types and members, from which the dimension follows.
-- Columns:
--   job INTEGER; group_key VARCHAR (see _comm_members); identity VARCHAR kineto-pg | nccl-payload |
--     whole-job | none; pg_desc VARCHAR (PyTorch's description, NULL without Kineto)
--   dimension   VARCHAR  dp | fsdp | tp | pp | ep | unknown
--   basis       VARCHAR  why that dimension (or why it cannot be known), one phrase
--   ops         VARCHAR  the NCCL operations seen on it, comma-separated, sorted
--   size        INTEGER  ranks in the communicator when known (payload, pg_config), else NULL
--   members     INTEGER[] its global ranks when known (pg_config / "Process Group Ranks", or every
--                        member present), else NULL
--   ranks_present BIGINT ranks of the workspace that ran its kernels
--   hosts       BIGINT   distinct hosts among them
--   link        VARCHAR  nvlink (every member present, one host) | network (members on several
--                        hosts) | unknown (members missing from the workspace, or no identity)
--   kernels BIGINT, instances BIGINT (matched instances), total_ns BIGINT ns (sum of its kernels'
--   durations over ranks), exposed_ns BIGINT ns (sum of comm_kernels.exposed_ns), bytes BIGINT (sum
--   of the kernels' payload message sizes; NULL when no size is known), busbw_gbps DOUBLE
--   (time-weighted mean of its instances' collectives.busbw_gbps: sum(busbw x transfer) / sum(transfer))
-- Definition (first rule that applies; docs/metrics.md "Communication by parallelism dimension"):
--   unknown  no communicator identity (no NCCL payload, no process group) and not a collective
--            that every rank of a complete job joins;
--   ep       all-to-all (NCCL AllToAll kernel, or PyTorch all_to_all);
--   pp       point-to-point only (send/recv);
--   fsdp     all-gather and reduce-scatter, no all-reduce (ZeRO-3 / FSDP parameters and gradients);
--   tp       a collective over consecutive ranks, all present, on one host, smaller than the job;
--   dp       all-reduce or reduce-scatter otherwise (gradient reduction across replicas);
--   unknown  otherwise (an all-gather or broadcast alone fits several dimensions).
-- columns: job, group_key, identity, pg_desc, dimension, basis, ops, size, members, ranks_present, hosts, link, kernels, instances, total_ns, exposed_ns, bytes, busbw_gbps
-- stage: job
-- result: stored
-- requires: _comm_members, collectives
CREATE OR REPLACE VIEW comm_groups AS
WITH cg_g AS (
    SELECT
        job, group_key,
        MIN(identity) AS identity0,
        ANY_VALUE(pg_desc) AS pg_desc,
        string_agg(DISTINCT op, ',' ORDER BY op) AS ops,
        BOOL_AND(op = 'SendRecv') AS only_p2p,
        BOOL_OR(op IN ('AllGather', 'AllGatherV')) AS has_ag,
        BOOL_OR(op = 'ReduceScatter') AS has_rs,
        BOOL_OR(op = 'AllReduce') AS has_ar,
        BOOL_OR(op = 'AllToAll' OR regexp_matches(COALESCE(kineto_collective, ''), '(?i)all_?to_?all'))
            AS has_a2a,
        COALESCE(MAX(pg_size), MAX(comm_size))::INTEGER AS size0,
        ANY_VALUE(pg_ranks) AS pg_ranks,
        list_sort(list(DISTINCT rank)) AS present,
        COUNT(DISTINCT rank) AS ranks_present,
        COUNT(DISTINCT host) AS hosts,
        MAX(job_ranks) AS job_ranks,
        MAX(world_size) AS world_size,
        BOOL_AND(job_complete) AS job_complete,
        BOOL_AND(op <> 'SendRecv' AND n_ranks = job_ranks) AS whole_job,
        COUNT(*) AS kernels,
        COUNT(DISTINCT coll_id) AS instances,
        SUM(duration_ns)::BIGINT AS total_ns,
        SUM(exposed_ns)::BIGINT AS exposed_ns,
        SUM(bytes)::BIGINT AS bytes,
        list(DISTINCT coll_id) FILTER (WHERE coll_id IS NOT NULL) AS colls
    FROM _comm_members
    GROUP BY job, group_key
),
cg_f AS (
    SELECT
        *,
        CASE WHEN identity0 = 'none' AND whole_job AND job_complete AND job_ranks > 1 THEN 'whole-job'
             ELSE identity0 END AS identity,
        COALESCE(size0, CASE WHEN identity0 = 'none' AND whole_job AND job_complete THEN job_ranks::INTEGER END)
            AS size,
        COALESCE(pg_ranks, CASE WHEN size0 IS NOT NULL AND ranks_present >= size0 THEN present END) AS members
    FROM cg_g
),
cg_d AS (
    SELECT
        *,
        size IS NOT NULL AND ranks_present >= size AS all_present,
        members IS NOT NULL AND list_max(members) - list_min(members) + 1 = len(members) AS consecutive
    FROM cg_f
),
cg_bw AS (
    SELECT g.job, g.group_key,
           SUM(c.busbw_gbps * c.transfer_ns) / NULLIF(SUM(c.transfer_ns) FILTER (WHERE c.busbw_gbps IS NOT NULL), 0)
               AS busbw_gbps
    FROM (SELECT job, group_key, unnest(colls) AS coll_id FROM cg_d) AS g
    JOIN collectives AS c ON c.coll_id = g.coll_id
    GROUP BY g.job, g.group_key
)
SELECT
    d.job, d.group_key, d.identity, d.pg_desc,
    CASE
        WHEN d.identity = 'none' THEN 'unknown'
        WHEN d.has_a2a THEN 'ep'
        WHEN d.only_p2p THEN 'pp'
        WHEN d.has_ag AND d.has_rs AND NOT d.has_ar THEN 'fsdp'
        WHEN d.all_present AND d.hosts = 1 AND d.consecutive AND d.size < d.world_size THEN 'tp'
        WHEN d.has_ar OR d.has_rs THEN 'dp'
        ELSE 'unknown'
    END AS dimension,
    CASE
        WHEN d.identity = 'none' THEN 'no communicator identity (no NCCL payload, no process group) and its '
            || 'instances do not span a complete job'
        WHEN d.has_a2a THEN 'all-to-all: expert (token) exchange'
        WHEN d.only_p2p THEN 'point-to-point only: pipeline stages'
        WHEN d.has_ag AND d.has_rs AND NOT d.has_ar THEN 'all-gather and reduce-scatter: sharded parameters'
        WHEN d.all_present AND d.hosts = 1 AND d.consecutive AND d.size < d.world_size
            THEN 'collective over ' || d.size || ' consecutive ranks inside one host'
        WHEN d.has_ar OR d.has_rs THEN 'gradient reduction across ' || COALESCE(d.size::VARCHAR, '?') || ' ranks'
            || CASE WHEN d.all_present THEN ' on ' || d.hosts || ' host(s)' ELSE '' END
        ELSE 'an all-gather or broadcast alone fits several dimensions'
    END AS basis,
    d.ops, d.size, d.members, d.ranks_present, d.hosts,
    CASE WHEN d.identity = 'none' THEN 'unknown' WHEN d.hosts > 1 THEN 'network' WHEN d.all_present THEN 'nvlink'
         ELSE 'unknown' END AS link,
    d.kernels, d.instances, d.total_ns, d.exposed_ns, d.bytes, b.busbw_gbps
FROM cg_d AS d
LEFT JOIN cg_bw AS b ON b.job = d.job AND b.group_key = d.group_key;
