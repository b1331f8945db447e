-- merge_nccl_kernels: every NCCL kernel, and every copy-engine collective, with the key that matches
-- it across ranks.
-- Why: a collective is one operation seen on several ranks; matching needs a key that is
-- the same on every participant without relying on clocks (which are what we align).
-- Key = (op, comm, seq), the first of:
--   * with the advanced NCCL trace's apiId (_merge_nccl_payload.api_id; collectives only, not
--     point-to-point): comm = communicator id (or 'nccl-api' when the payload names none),
--     seq = apiId, which NCCL gives every participant of one operation alike;
--   * with NCCL's NVTX payload (_merge_nccl_payload): comm = communicator id, seq = the
--     payload's sequence number, else the ordinal of the kernel among the rank's kernels
--     of the same op on that communicator (0-based, by start time);
--   * with PyTorch's process group on the kernel (kineto_collectives; collectives only):
--     comm = 'pg:<Process Group Name>' (with its ranks, '[0,1,...]', when the trace lists them:
--     two groups of one name never merge), seq = PyTorch's "Seq" (its collective number in the
--     group, the same on every member) when each of the rank's kernels of this (op, group) has
--     one of its own, else the kernel's ordinal among them (TraceLens' "process group name and
--     order");
--   * without: comm = 'stream<i>' where i is the rank's i-th stream (by stream id) that
--     carries this op, seq = ordinal of the kernel on that stream among kernels of this op.
--     (nth AllReduce on rank A <-> nth AllReduce on rank B.)
-- Columns:
--   rank, stream_id, start_ns, end_ns, duration_ns (ns, file clock), correlation_id,
--   op       VARCHAR  AllReduce | AllGather | ReduceScatter | Reduce | Broadcast | SendRecv | ...
--   comm     VARCHAR  communicator id or stream ordinal (see above)
--   seq      BIGINT   sequence within (op, comm)
--   bytes    BIGINT   message size from the payload (NULL when unknown)
--   key_source VARCHAR nccl-api-id | nvtx-payload | kineto-seq | kineto-pg-order | stream-ordinal
--   peer     INTEGER  point-to-point peer named by the payload, a rank of `comm` (NULL when unknown)
--   comm_size INTEGER ranks of the communicator when known: NCCL's init payload for `comm`
--                     (merge_nccl_comms), else the operation's own payload ("nRanks"), else Kineto's "Group size" (not for SendRecv/Send/Recv,
--                     whose PyTorch group size is the whole process group's); NULL when unknown
--   engine   VARCHAR  kernel | copy-engine
-- Kernels are NCCL's when the demangled name starts with 'nccl' (or 'void nccl'). Point-to-point
-- kernels get their matching key in the job step (_merge_coll_arrivals), from their peer.
-- Copy-engine collectives (NCCL >= 2.28 `ce-coll`, no kernel): one row per operation and rank
-- (_nccl_ce_ops: its copies grouped by their NCCL API range; start/end = first copy's start, last
-- copy's end; correlation_id = its first copy's; op from the API range's name), keyed exactly as a
-- kernel (its payload is the API range's, so apiId first). An operation counts once: a copy-engine
-- row whose key a kernel of the same rank also has (a collective that ran a kernel too) is left to
-- the kernel. NOT CONFIRMED by a real capture (no shared trace has copy-engine collectives).
-- columns: rank, stream_id, start_ns, end_ns, duration_ns, correlation_id, op, comm, seq, bytes, key_source, peer, comm_size, engine
-- stage: rank
-- result: stored
-- requires: _merge_nccl_payload, _nccl_ce_ops, kernels, kineto_collectives, merge_nccl_comms, nvtx
CREATE OR REPLACE VIEW merge_nccl_kernels AS
WITH k AS (
    SELECT
        rank, stream_id, start_ns, end_ns, duration_ns, correlation_id,
        COALESCE(NULLIF(regexp_extract(
            name,
            '^(?:void )?nccl(?:Symk?DevKernel_|DevKernel_|Kernel_)?'
            || '(AllReduce|AllGatherV|AllGather|ReduceScatter|Reduce|Broadcast|SendRecv|Send|Recv|AllToAll|Generic)',
            1), ''), 'Other') AS op,
        'kernel' AS engine
    FROM kernels
    WHERE starts_with(name, 'nccl') OR starts_with(name, 'void nccl')
    UNION ALL
    SELECT rank, stream_id, start_ns, end_ns, duration_ns, correlation_id, op, 'copy-engine' AS engine
    FROM _nccl_ce_ops
),
keyed AS (
    SELECT k.*, p.payload_seq, p.bytes, p.peer,
           CASE WHEN k.op NOT IN ('SendRecv', 'Send', 'Recv') THEN p.api_id END AS api_id,
           p.comm IS NULL AND k.op NOT IN ('SendRecv', 'Send', 'Recv') AND kc.pg_name IS NOT NULL AS by_pg,
           COALESCE(p.comm, CASE WHEN k.op NOT IN ('SendRecv', 'Send', 'Recv') AND kc.pg_name IS NOT NULL
                                 THEN 'pg:' || kc.pg_name || COALESCE('[' || array_to_string(kc.pg_ranks, ',') || ']', '')
                            END) AS payload_comm,
           kc.kseq,
           COALESCE(m.comm_size, CASE WHEN k.op NOT IN ('SendRecv', 'Send', 'Recv') THEN p.comm_ranks END,
                    CASE WHEN k.op NOT IN ('SendRecv', 'Send', 'Recv') THEN kc.group_size END)
               AS comm_size
    FROM k
    LEFT JOIN _merge_nccl_payload AS p ON p.rank = k.rank AND p.correlation_id = k.correlation_id
    LEFT JOIN merge_nccl_comms AS m ON m.rank = k.rank AND m.comm = p.comm
    LEFT JOIN (
        SELECT rank, correlation_id, MAX(group_size) AS group_size, MAX(pg_name) AS pg_name,
               MAX(pg_ranks) AS pg_ranks, MAX(seq) AS kseq
        FROM kineto_collectives GROUP BY ALL
    ) AS kc ON kc.rank = k.rank AND kc.correlation_id = k.correlation_id
),
streams AS (
    SELECT rank, op, stream_id, DENSE_RANK() OVER (PARTITION BY rank, op ORDER BY stream_id) - 1 AS stream_idx
    FROM (SELECT DISTINCT rank, op, stream_id FROM k)
),
ordered AS (
    SELECT
        keyed.*,
        ROW_NUMBER() OVER (
            PARTITION BY rank, op, COALESCE(payload_comm, CAST(stream_id AS VARCHAR)), payload_comm IS NULL
            ORDER BY start_ns, correlation_id
        ) - 1 AS ordinal,
        COUNT(*) OVER (PARTITION BY rank, op, payload_comm, kseq) AS seq_n
    FROM keyed
),
seq_checked AS (
    -- PyTorch's Seq is the key of a rank's (op, group) only where each of its kernels has one of
    -- its own (several kernels of one collective, or none, would leave the others unmatched)
    SELECT *, BOOL_AND(seq_n = 1 AND kseq IS NOT NULL) OVER (PARTITION BY rank, op, payload_comm) AS seq_unique
    FROM ordered
),
keys AS (
    SELECT
        o.rank, o.stream_id, o.start_ns, o.end_ns, o.duration_ns, o.correlation_id, o.op,
        CASE WHEN o.api_id IS NOT NULL THEN COALESCE(o.payload_comm, 'nccl-api')
             ELSE COALESCE(o.payload_comm, 'stream' || CAST(s.stream_idx AS VARCHAR)) END AS comm,
        CASE WHEN o.api_id IS NOT NULL THEN o.api_id
             WHEN o.by_pg THEN CASE WHEN o.seq_unique THEN o.kseq ELSE o.ordinal END
             WHEN o.payload_comm IS NOT NULL THEN COALESCE(o.payload_seq, o.ordinal) ELSE o.ordinal END AS seq,
        o.bytes,
        CASE WHEN o.api_id IS NOT NULL THEN 'nccl-api-id'
             WHEN o.by_pg THEN CASE WHEN o.seq_unique THEN 'kineto-seq' ELSE 'kineto-pg-order' END
             WHEN o.payload_comm IS NOT NULL THEN 'nvtx-payload' ELSE 'stream-ordinal' END AS key_source,
        o.peer::INTEGER AS peer,
        o.comm_size::INTEGER AS comm_size,
        o.engine
    FROM seq_checked AS o
    JOIN streams AS s ON s.rank = o.rank AND s.op = o.op AND s.stream_id = o.stream_id
)
-- a copy-engine row whose key a kernel of its rank has too is that kernel's operation (counted once)
SELECT * EXCLUDE (has_kernel)
FROM (SELECT *, BOOL_OR(engine = 'kernel') OVER (PARTITION BY rank, op, comm, seq) AS has_kernel FROM keys)
WHERE engine = 'kernel' OR NOT has_kernel;
