-- nccl_kernels: every NCCL kernel with what its name says about the collective.
-- Why: bus-bandwidth maths, per-collective breakdowns and "is this AllReduce on TREE or RING"
-- need the collective, reduction op, data type and algorithm, which NCCL encodes in kernel names
-- differently in each release (docs: nsys-sqlite-schema.md §8.1).
-- Columns:
--   rank INTEGER, device_id INTEGER, stream_id BIGINT, start_ns BIGINT ns, end_ns BIGINT ns,
--   duration_ns BIGINT ns, correlation_id BIGINT, name VARCHAR (demangled),
--   collective VARCHAR  NCCL spelling: AllReduce | AllGather | AllGatherV | ReduceScatter | Reduce |
--                       Broadcast | SendRecv | Generic | ... (NULL when the name does not parse)
--   redop VARCHAR       sum | prod | min | max | minmax | premulsum | sumpostdiv | avg; NULL for
--                       collectives that do not reduce (AllGather, Broadcast, SendRecv, ...)
--   dtype VARCHAR       i8 | u8 | i32 | u32 | i64 | u64 | f16 | f32 | f64 | bf16 | f8e4m3 | f8e5m2
--                       (NULL for collectives that do not reduce)
--   algo VARCHAR        RING | TREE | COLLNET_DIRECT | COLLNET_CHAIN | NVLS | NVLS_TREE | PAT | ...
--                       (symmetric kernels: their own algorithm token, e.g. RSxLD_AGxST)
--   proto VARCHAR       LL | LL128 | SIMPLE (NULL when the name has none)
--   naming VARCHAR      nccl<=2.7 | nccl2.8-2.18 | nccl>=2.19 | nccl-symmetric | unparsed
-- Definition: the name (leading 'void ' and parameter list removed) is matched against the four
--   naming schemes below. Caveat from NCCL itself: since 2.8 only a few kernels are compiled per
--   collective and the run-time algorithm/protocol/redop is chosen at launch, so for 2.8+ names
--   the redop and proto are those of the compiled kernel and NVLS/CollNet/PAT run inside RING;
--   the collective, the dtype (signed ints fold to unsigned in 2.19+) and TREE vs not-TREE are
--   reliable.
-- columns: rank, device_id, stream_id, start_ns, end_ns, duration_ns, correlation_id, name, collective, redop, dtype, algo, proto, naming
-- stage: rank
-- result: stored
-- requires: kernels
CREATE OR REPLACE VIEW nccl_kernels AS
WITH names AS (
    -- each distinct name is tested once, not every kernel
    SELECT name, regexp_replace(regexp_replace(name, '^void\s+', ''), '\(.*$', '') AS base
    FROM (SELECT DISTINCT name FROM kernels)
    WHERE regexp_matches(name, '(^|\W)nccl\w*Kernel')
),
parsed AS (
    SELECT
        name,
        regexp_extract(base,
            '^ncclDevKernel_(AllReduce|AllGatherV|AllGather|ReduceScatter|Reduce|Broadcast|SendRecv|Generic|AllToAll|Gather|Scatter)'
            || '(?:_(Sum|Prod|MinMax|PreMulSum|SumPostDiv)_([iu](?:8|32|64)|f16|f32|f64|bf16|f8e4m3|f8e5m2))?'
            || '(?:_(RING|TREE|COLLNET_DIRECT|COLLNET_CHAIN|NVLS_TREE|NVLS|PAT)_(LL128|LL|SIMPLE))?',
            ['coll', 'redop', 'ty', 'algo', 'proto']) AS v219,
        regexp_extract(base,
            '^ncclKernel_([A-Za-z]+)_(RING|TREE|COLLNET_DIRECT|COLLNET_CHAIN|COLLNET|NVLS_TREE|NVLS|PAT)'
            || '_(LL128|LL|SIMPLE)_(Sum|Prod|Min|Max|MinMax|PreMulSum|SumPostDiv)_(\w+)',
            ['coll', 'algo', 'proto', 'redop', 'ty']) AS v28,
        regexp_extract(base,
            '^ncclSymk?DevKernel_(AllReduce|AllGather|ReduceScatter)_([A-Za-z0-9_]+?)'
            || '(?:_(sum|avg)_(f32|f16|bf16|f8e4m3|f8e5m2))?$',
            ['coll', 'algo', 'redop', 'ty']) AS vsym,
        regexp_extract(base,
            '^nccl(AllReduce|AllGather|ReduceScatter|Reduce|Broadcast|SendRecv)(Ring|Tree|CollNet)?'
            || '(LL128|LL)?Kernel_([A-Za-z]+)_(\w+)$',
            ['coll', 'algo', 'proto', 'redop', 'ty']) AS v27
    FROM names
),
chosen AS (
    SELECT
        name,
        CASE
            WHEN v219.coll <> '' THEN 'nccl>=2.19'
            WHEN v28.coll <> '' THEN 'nccl2.8-2.18'
            WHEN vsym.coll <> '' THEN 'nccl-symmetric'
            WHEN v27.coll <> '' THEN 'nccl<=2.7'
            ELSE 'unparsed'
        END AS naming,
        NULLIF(coalesce(NULLIF(v219.coll, ''), NULLIF(v28.coll, ''), NULLIF(vsym.coll, ''), v27.coll), '')
            AS collective,
        NULLIF(lower(coalesce(NULLIF(v219.redop, ''), NULLIF(v28.redop, ''), NULLIF(vsym.redop, ''),
                              v27.redop)), '') AS redop_raw,
        NULLIF(coalesce(NULLIF(v219.ty, ''), NULLIF(v28.ty, ''), NULLIF(vsym.ty, ''), v27.ty), '') AS ty_raw,
        NULLIF(upper(coalesce(NULLIF(v219.algo, ''), NULLIF(v28.algo, ''), NULLIF(v27.algo, ''))), '')
            AS algo_std,
        NULLIF(vsym.algo, '') AS algo_sym,
        NULLIF(upper(coalesce(NULLIF(v219.proto, ''), NULLIF(v28.proto, ''), v27.proto)), '') AS proto
    FROM parsed
),
normalised AS (
    SELECT
        name, naming, collective,
        coalesce(algo_std, algo_sym) AS algo,
        proto,
        collective IN ('AllReduce', 'Reduce', 'ReduceScatter') AS reduces,
        CASE WHEN redop_raw = 'copy' THEN NULL ELSE redop_raw END AS redop_n,
        CASE ty_raw
            WHEN 'int8_t' THEN 'i8' WHEN 'uint8_t' THEN 'u8'
            WHEN 'int32_t' THEN 'i32' WHEN 'uint32_t' THEN 'u32'
            WHEN 'int64_t' THEN 'i64' WHEN 'uint64_t' THEN 'u64'
            WHEN 'half' THEN 'f16' WHEN 'float' THEN 'f32' WHEN 'double' THEN 'f64'
            WHEN '__nv_bfloat16' THEN 'bf16' WHEN 'bfloat16' THEN 'bf16'
            WHEN '__nv_fp8_e4m3' THEN 'f8e4m3' WHEN '__nv_fp8_e5m2' THEN 'f8e5m2'
            ELSE ty_raw
        END AS dtype_n
    FROM chosen
)
SELECT
    k.rank, k.device_id, k.stream_id, k.start_ns, k.end_ns, k.end_ns - k.start_ns AS duration_ns,
    k.correlation_id, k.name,
    n.collective,
    CASE WHEN n.reduces THEN n.redop_n END AS redop,
    CASE WHEN n.reduces THEN n.dtype_n END AS dtype,
    n.algo,
    n.proto,
    n.naming
FROM kernels k
JOIN normalised n ON n.name = k.name
WHERE contains(k.name, 'nccl');  -- a cheap necessary test first: few kernels reach the join
