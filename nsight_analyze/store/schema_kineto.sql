-- PyTorch-profiler (Kineto JSON) tables: what Kineto knows and the canonical tables have no
-- column for. Filled by nsight_analyze/sources/kineto/; empty for nsys/ncu workspaces.
-- All times are integer nanoseconds on the rank's file timeline (Kineto ts in µs × 1000,
-- exact). Columns are only ever added.

-- One row per NCCL kernel whose collective metadata is known: from the kernel's own args
-- (newer PyTorch) or, failing that, from the `record_param_comms` CPU op that launched it
-- (same "External id"). Join to kernels by (rank, correlation_id). Bytes make bus bandwidth
-- computable: in_bytes / out_bytes = nelems × dtype_bytes (per rank, as PyTorch reports them).
CREATE TABLE IF NOT EXISTS kineto_collectives (
    rank            INTEGER,
    correlation_id  BIGINT,      -- of the kernel (= kernels.correlation_id)
    external_id     BIGINT,      -- Kineto "External id": links the kernel to its CPU op
    stream_id       BIGINT,
    start_ns        BIGINT,      -- kernel start (file timeline)
    end_ns          BIGINT,
    kernel_name     VARCHAR,
    collective      VARCHAR,     -- PyTorch's "Collective name": allreduce, _allgather_base, send, ...
    dtype           VARCHAR,     -- PyTorch scalar type name: Float, BFloat16, Half, Long, ...
    dtype_bytes     INTEGER,     -- element size; NULL for an unknown dtype
    in_nelems       BIGINT,      -- "In msg nelems"
    out_nelems      BIGINT,      -- "Out msg nelems"
    in_bytes        BIGINT,      -- in_nelems × dtype_bytes
    out_bytes       BIGINT,      -- out_nelems × dtype_bytes
    in_split_size   VARCHAR,     -- "In split size" as written (e.g. '[]' or '[4, 4]'; all-to-all)
    out_split_size  VARCHAR,
    group_size      INTEGER,     -- "Group size": ranks in the process group
    pg_name         VARCHAR,     -- "Process Group Name" (e.g. '0')
    pg_desc         VARCHAR,     -- "Process Group Description" (e.g. 'default_pg')
    pg_ranks        INTEGER[],   -- "Process Group Ranks" (global ranks), NULL when not a list
    source          VARCHAR      -- kernel-args | record_param_comms
);
-- "Seq": PyTorch's sequence number of the collective in its process group (the same on every
-- member; merge_nccl_kernels matches by it), NULL when the trace has none
ALTER TABLE kineto_collectives ADD COLUMN IF NOT EXISTS seq BIGINT;

-- GPU-side annotations (Kineto cat `gpu_user_annotation`): the span of the GPU work of a
-- host annotation (record_function / ProfilerStep) on one stream. Kept apart from `nvtx` on
-- purpose: these ranges live on the GPU timeline, and a GPU-side `ProfilerStep#N` range in
-- `nvtx` would make launch-time step projection (tp_step_ops) assign host launches of step N+1
-- to step N whenever the GPU runs behind the host.
CREATE TABLE IF NOT EXISTS kineto_gpu_annotations (
    rank         INTEGER,
    device_id    INTEGER,
    stream_id    BIGINT,
    start_ns     BIGINT,
    end_ns       BIGINT,
    text         VARCHAR,
    external_id  BIGINT       -- matches the host annotation's "External id"
);

-- CUPTI range-profiler results (Kineto cat `cuda_profiler_range`, recorded with
-- experimental_config profiler_metrics and profiler_measure_per_kernel=True): one row per
-- profiled kernel with its FLOP counters (smsp__sass_thread_inst_executed_op_<op>_pred_on.sum,
-- thread instructions: `kineto__cuda_core_flops`), its DRAM bytes (dram__bytes.sum,
-- dram__bytes_read.sum, dram__bytes_write.sum) and tensor-pipe instructions
-- (sm__inst_executed_pipe_tensor.sum: `kineto__tensor_core_insts`); NULL when the trace did not
-- record that metric. range_id is the range's
-- 0-based position in the file (time order). The range profiler replays and serialises kernels,
-- so start_ns/end_ns are not the kernel's unperturbed time: queries/hfu/kernel_flops.sql turns the
-- counters into FLOPs and queries/timeline/cupti_range_joins.sql places them on the rank's kernels
-- (same name, same order).
CREATE TABLE IF NOT EXISTS kineto_profiler_ranges (
    rank      INTEGER,
    range_id  INTEGER,
    name      VARCHAR,      -- the kernel's name; '__missing__' where CUPTI did not know it
    start_ns  BIGINT,
    end_ns    BIGINT,
    dadd BIGINT, dmul BIGINT, dfma BIGINT,
    fadd BIGINT, fmul BIGINT, ffma BIGINT,
    hadd BIGINT, hmul BIGINT, hfma BIGINT,
    dram_bytes BIGINT, dram_read BIGINT, dram_write BIGINT, tensor_inst BIGINT
);
-- Columns added after the first release (a workspace made before gets them here).
ALTER TABLE kineto_profiler_ranges ADD COLUMN IF NOT EXISTS dram_bytes BIGINT;
ALTER TABLE kineto_profiler_ranges ADD COLUMN IF NOT EXISTS dram_read BIGINT;
ALTER TABLE kineto_profiler_ranges ADD COLUMN IF NOT EXISTS dram_write BIGINT;
ALTER TABLE kineto_profiler_ranges ADD COLUMN IF NOT EXISTS tensor_inst BIGINT;

-- One row per process group the rank's trace lists in `distributedInfo.pg_config` (PyTorch's
-- c10d process groups, newer PyTorch): which global ranks communicate together. Process-group
-- names match kineto_collectives.pg_name, so each NCCL kernel finds its group's members even
-- when only one rank's trace is present (the analysis of communication by parallelism
-- dimension, queries/comms/comm_kernels.sql, reads it). Empty when the trace has no pg_config.
CREATE TABLE IF NOT EXISTS kineto_process_groups (
    rank            INTEGER,     -- the workspace rank whose trace lists the group
    pg_name         VARCHAR,     -- "pg_name" (e.g. '0'), = kineto_collectives.pg_name
    pg_desc         VARCHAR,     -- "pg_desc" (e.g. 'default_pg', 'undefined')
    backend_config  VARCHAR,     -- "backend_config" (e.g. 'cuda:nccl', 'cpu:gloo,cuda:gloo')
    pg_size         INTEGER,     -- "pg_size": ranks in the group
    pg_ranks        INTEGER[],   -- "ranks": global ranks of the group, NULL when not a list
    nccl_version    VARCHAR      -- distributedInfo.nccl_version (NULL when absent)
);

-- The versions a trace's top-level metadata names, one row per key present (sources/kineto/
-- loader.py VERSION_KEYS): distributedInfo.nccl_version (whether or not the trace has pg_config),
-- cuda_runtime_version / cuda_driver_version (CUDA's encoding: 12040 = 12.4), cupti_version,
-- hip_runtime_version / hip_driver_version (HIP's: 70051831 = 7.0.51831), roctracer_version, and
-- pytorch_version / torch_version / 'pytorch version' where the program added one. compare's
-- setup reads them (compare/setup.py); absent keys have no row (unknown, never guessed).
CREATE TABLE IF NOT EXISTS kineto_versions (
    rank   INTEGER,     -- the workspace rank whose trace names it
    key    VARCHAR,     -- the metadata key, as written
    value  VARCHAR      -- the value as written (a number as its text)
);

-- Shapes of the PyTorch ops an analysis reads (cpu_op events recorded with record_shapes=True
-- whose name matches sources/kineto/duck_json.SHAPE_OPS: the softmax ops, whose input is the
-- attention score matrix b x h x n x n, and the matmul / convolution / attention ops of
-- duck_json.COMPUTE_OPS, whose FLOPs and bytes follow from their shapes). A kernel the op launched
-- carries the op's "External id" and its launch (cuda_runtime, same thread) lies inside the op's
-- span; queries/kernels/attention_scores.sql finds the op around the launch of an unfused softmax kernel,
-- queries/hfu/op_flops.sql the kernels of each matmul / conv / attention op.
CREATE TABLE IF NOT EXISTS kineto_op_shapes (
    rank         INTEGER,
    tid          BIGINT,       -- host thread (= cuda_api.tid of the launches inside it)
    start_ns     BIGINT,
    end_ns       BIGINT,
    name         VARCHAR,      -- e.g. aten::_softmax, aten::_softmax_backward_data
    external_id  BIGINT,       -- "External id" (= that of the kernels it launched)
    input_dims   VARCHAR,      -- "Input Dims" as JSON text, e.g. [[1,16,4096,4096],[],[]]
    input_types  VARCHAR,      -- "Input type" as JSON text, e.g. ["c10::BFloat16","Scalar","Scalar"]
    concrete_inputs VARCHAR    -- "Concrete Inputs" as JSON text (newer PyTorch; NULL when absent): the
                               -- scalar arguments as strings, e.g. ["","","","0.","True","False","0.125"]
);
ALTER TABLE kineto_op_shapes ADD COLUMN IF NOT EXISTS concrete_inputs VARCHAR;
