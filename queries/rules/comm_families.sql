-- The statements of the communication fix families (nsight_analyze/rules/comm_families.py).

-- name: family
-- Which fixes a communication operation's exposed time calls for: its communicator's dimension when
-- known, else its collective's (an all-reduce is most often gradient reduction, all-gather and
-- reduce-scatter sharded parameters, all-to-all expert exchange, send/recv pipeline stages); a
-- kernel that is not NCCL's by its name: symmetric-memory / custom all-reduce, all-gather and
-- reduce-scatter kernels (vLLM, TensorRT-LLM, PyTorch async TP, Megatron multimem) serve tensor
-- parallelism, DeepEP expert parallelism, a peer copy is point-to-point.
CASE WHEN dimension IN ('dp', 'fsdp', 'tp', 'pp', 'ep') THEN dimension
     WHEN op IN ('AllReduce', 'Reduce') THEN 'dp'
     WHEN op IN ('ReduceScatter', 'AllGather', 'AllGatherV') THEN 'fsdp'
     WHEN op = 'AllToAll' THEN 'ep'
     WHEN op = 'SendRecv' THEN 'p2p'
     WHEN op = 'Broadcast' THEN 'broadcast'
     WHEN regexp_matches(op, '(?i)all_?to_?all|deep_ep::') THEN 'ep'
     WHEN regexp_matches(op, '(?i)all_?reduce|all_?gather|reduce_?scatter|multimem') THEN 'tp'
     WHEN op LIKE '[CUDA memcpy %' THEN 'p2p'
     ELSE 'other' END

-- name: exposed_ops
-- The communication operations (diag_comm_exposure), narrowed by of_dimension / of_kernel.
SELECT * FROM diag_comm_exposure

-- name: of_dimension
-- The operations $ops of one dimension ($dimension: a quoted literal).
SELECT * FROM ($ops) WHERE dimension = $dimension

-- name: of_kernel
-- The operations $ops of one kernel name ($kernel: a quoted literal).
SELECT * FROM ($ops) WHERE name = $kernel

-- name: exposed_families
-- The time of the operations $ops by fix family ($family: the statement `family`), largest first,
-- with each family's share of the total; $measure: exposed_ns or duration_ns.
SELECT family, string_agg(DISTINCT op, ',' ORDER BY op) AS ops,
       string_agg(DISTINCT coalesce(dimension, 'none'), ',' ORDER BY coalesce(dimension, 'none'))
           AS dimensions,
       sum($measure)::BIGINT AS exposed_ns,
       sum($measure) / nullif(sum(sum($measure)) OVER (), 0) AS share
FROM (SELECT *, $family AS family FROM ($ops))
GROUP BY family HAVING sum($measure) > 0
ORDER BY exposed_ns DESC, family
