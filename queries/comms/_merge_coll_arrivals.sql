-- _merge_coll_arrivals: each NCCL kernel keyed for matching, on the aligned timeline.
-- Why: the common input of the collective views; arrival = aligned kernel start. Keys never
-- cross jobs (`job` is part of every key).
-- Collectives keep merge_nccl_kernels' key (op, comm, seq). Point-to-point kernels (SendRecv,
-- Send, Recv; op is 'SendRecv' for all three) are paired only with their real peer, the first of:
--   1. the payload's "Peer rank" mapped through the communicator's members (merge_nccl_comms);
--   2. the other member of a 2-rank communicator (payload comm id) whose members are both present:
--      known from the init payloads, or, in a complete job, the only two ranks running
--      point-to-point kernels on that communicator;
--   3. in a complete job (see `jobs`), the only other rank of the job running point-to-point kernels.
--   Otherwise the peer is unknown (e.g. 2 of 128 ranks present) and the kernel is not paired.
--   Paired: comm = 'p2p:<lower rank>-<higher rank>', seq = the kernel's ordinal among the rank's
--   point-to-point kernels with that peer (by start), key_source 'peer'; unknown peer: comm =
--   'p2p:<rank>-?', key_source 'peer-unknown' (an instance of one rank).
-- Columns: rank, job, host (clock domain), op, comm, seq, stream_id, correlation_id, duration_ns (ns),
--   bytes, key_source (nccl-api-id | nvtx-payload | kineto-seq | kineto-pg-order | stream-ordinal | peer |
--   peer-unknown), peer_rank INTEGER
--   (point-to-point peer, workspace rank; NULL when unknown or not point-to-point), comm_size INTEGER
--   (participants the instance must have: 2 for point-to-point, else merge_nccl_kernels.comm_size),
--   job_complete BOOLEAN (jobs.complete), arrive_ns BIGINT ns (aligned start), aligned_end_ns BIGINT ns.
-- stage: job
-- result: view
-- requires: jobs, merge_nccl_comms, merge_nccl_kernels, merge_rank_clock
CREATE OR REPLACE VIEW _merge_coll_arrivals AS
WITH ca_k AS (
    SELECT
        n.*, c.job, c.host, c.clock_offset_ns, COALESCE(j.complete, TRUE) AS job_complete,
        n.op IN ('SendRecv', 'Send', 'Recv') AS p2p
    FROM merge_nccl_kernels AS n
    JOIN merge_rank_clock AS c ON c.rank = n.rank
    LEFT JOIN jobs AS j ON j.job = c.job
),
ca_members AS (
    SELECT c.job, m.comm, m.comm_rank, m.rank, m.comm_size
    FROM merge_nccl_comms AS m JOIN merge_rank_clock AS c ON c.rank = m.rank
),
ca_pair_comms AS (  -- 2-rank communicators whose two members are both present
    SELECT job, comm, MIN(rank) AS lo, MAX(rank) AS hi
    FROM ca_members
    GROUP BY job, comm
    HAVING MAX(comm_size) = 2 AND COUNT(DISTINCT rank) = 2
),
ca_comm_p2p AS (  -- ranks running point-to-point kernels, per payload communicator
    SELECT job, comm, COUNT(DISTINCT rank) AS n, MIN(rank) AS lo, MAX(rank) AS hi
    FROM ca_k WHERE p2p AND key_source = 'nvtx-payload'
    GROUP BY job, comm
),
ca_job_p2p AS (  -- ranks running point-to-point kernels, per job
    SELECT job, COUNT(DISTINCT rank) AS n, MIN(rank) AS lo, MAX(rank) AS hi
    FROM ca_k WHERE p2p
    GROUP BY job
),
ca_peered AS (
    SELECT
        k.*,
        CASE WHEN k.p2p THEN COALESCE(
            pm.rank,
            CASE WHEN k.rank = pc.lo THEN pc.hi WHEN k.rank = pc.hi THEN pc.lo END,
            CASE WHEN k.job_complete AND cp.n = 2 THEN CASE WHEN k.rank = cp.lo THEN cp.hi ELSE cp.lo END END,
            CASE WHEN k.job_complete AND jp.n = 2 THEN CASE WHEN k.rank = jp.lo THEN jp.hi ELSE jp.lo END END
        ) END AS peer_rank
    FROM ca_k AS k
    LEFT JOIN ca_members AS pm
        ON k.p2p AND k.key_source = 'nvtx-payload' AND pm.job = k.job AND pm.comm = k.comm
       AND pm.comm_rank = k.peer AND pm.rank <> k.rank
    LEFT JOIN ca_pair_comms AS pc ON k.p2p AND k.key_source = 'nvtx-payload' AND pc.job = k.job AND pc.comm = k.comm
    LEFT JOIN ca_comm_p2p AS cp ON k.p2p AND k.key_source = 'nvtx-payload' AND cp.job = k.job AND cp.comm = k.comm
    LEFT JOIN ca_job_p2p AS jp ON k.p2p AND jp.job = k.job
),
ca_keyed AS (
    SELECT
        *,
        CASE WHEN p2p THEN ROW_NUMBER() OVER (
            PARTITION BY rank, p2p, peer_rank ORDER BY start_ns, correlation_id
        ) - 1 END AS p2p_seq
    FROM ca_peered
)
SELECT
    rank, job, host,
    CASE WHEN p2p THEN 'SendRecv' ELSE op END AS op,
    CASE
        WHEN NOT p2p THEN comm
        WHEN peer_rank IS NULL THEN 'p2p:' || rank || '-?'
        ELSE 'p2p:' || LEAST(rank, peer_rank) || '-' || GREATEST(rank, peer_rank)
    END AS comm,
    CASE WHEN p2p THEN p2p_seq ELSE seq END AS seq,
    stream_id, correlation_id, duration_ns, bytes,
    CASE WHEN NOT p2p THEN key_source WHEN peer_rank IS NULL THEN 'peer-unknown' ELSE 'peer' END AS key_source,
    peer_rank::INTEGER AS peer_rank,
    CASE WHEN p2p THEN 2 ELSE comm_size END::INTEGER AS comm_size,
    job_complete,
    start_ns + clock_offset_ns AS arrive_ns,
    end_ns + clock_offset_ns AS aligned_end_ns
FROM ca_keyed;
