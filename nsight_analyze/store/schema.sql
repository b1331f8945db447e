-- Canonical workspace tables: the public interface of a nsight-analyze workspace.
-- All times are integer nanoseconds on the rank's own (file) timeline; aligned
-- times come from views that add ranks.clock_offset_ns. Every event row carries
-- `rank`. Names are real text, never string ids. Columns are only ever added.

CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR);

CREATE TABLE IF NOT EXISTS files (
    file_id          INTEGER PRIMARY KEY,
    path             VARCHAR NOT NULL,
    sha256           VARCHAR NOT NULL,
    size_bytes       BIGINT,
    source_format    VARCHAR,      -- nsys-sqlite | kineto-json | ncu-csv | ncu-rep | nsys-recipe
    nsys_version     VARCHAR,      -- EXPORT_PRODUCT_VERSION, NULL for pre-2022 exports; Kineto: its tracer ('cupti N', 'roctracer N', 'hip N')
    schema_version   VARCHAR,      -- EXPORT_SCHEMA_VERSION, NULL for pre-2022 exports
    ingested_at      TIMESTAMP,
    status           VARCHAR,      -- ok
    warnings         VARCHAR[],
    skipped          VARCHAR[]     -- 'TABLE: N rows (why)' for anything not loaded
);

CREATE TABLE IF NOT EXISTS ranks (
    rank                  INTEGER PRIMARY KEY,
    file_id               INTEGER NOT NULL,
    pid                   BIGINT,
    global_pid            BIGINT,
    hostname              VARCHAR,
    device_id             INTEGER,     -- CUDA ordinal as seen by the process
    gpu_name              VARCHAR,
    session_start_utc_ns  BIGINT,      -- TARGET_INFO_SESSION_START_TIME.utcEpochNs
    clock_offset_ns       BIGINT,      -- add to file time to get aligned (job) time
    rank_source           VARCHAR,     -- env:RANK | mpi | nccl | filename | order
    local_rank            INTEGER,
    world_size            INTEGER,     -- ranks of the job the file says it belongs to (NULL: unknown)
    alignment_method      VARCHAR,     -- session-start | collectives | none
    job                   INTEGER,     -- 1-based job id, set by the job step (queries/job/merge_jobs.sql)
    job_rank              INTEGER      -- rank within its job (= rank unless another job claimed the number)
);
-- Columns added after the first release (a workspace made before gets them here).
ALTER TABLE ranks ADD COLUMN IF NOT EXISTS job INTEGER;
ALTER TABLE ranks ADD COLUMN IF NOT EXISTS job_rank INTEGER;

CREATE TABLE IF NOT EXISTS gpus (
    rank                  INTEGER,
    device_id             INTEGER,
    name                  VARCHAR,
    sm_count              INTEGER,
    clock_hz              BIGINT,
    memory_bandwidth_bps  BIGINT,
    memory_bytes          BIGINT,
    compute_major         INTEGER,
    compute_minor         INTEGER,
    uuid                  VARCHAR,
    bus_location          VARCHAR,
    source                VARCHAR      -- TARGET_INFO_GPU | TARGET_INFO_CUDA_GPU | kineto | inferred | unknown
);

CREATE TABLE IF NOT EXISTS kernels (
    rank                  INTEGER,
    device_id             INTEGER,
    stream_id             BIGINT,
    start_ns              BIGINT,
    end_ns                BIGINT,
    duration_ns           BIGINT,
    name                  VARCHAR,     -- demangled name (what nsys stats shows)
    short_name            VARCHAR,
    correlation_id        BIGINT,
    grid_x INTEGER, grid_y INTEGER, grid_z INTEGER,
    block_x INTEGER, block_y INTEGER, block_z INTEGER,
    registers_per_thread  INTEGER,
    static_smem_bytes     BIGINT,
    dynamic_smem_bytes    BIGINT,
    graph_id              BIGINT,
    graph_node_id         BIGINT,
    category              VARCHAR,     -- compute | memory | comms | other
    subcategory           VARCHAR
);

CREATE TABLE IF NOT EXISTS memops (
    rank            INTEGER,
    device_id       INTEGER,
    stream_id       BIGINT,
    start_ns        BIGINT,
    end_ns          BIGINT,
    duration_ns     BIGINT,
    kind            VARCHAR,   -- HtoD, DtoH, DtoD, HtoH, PtoP, ..., memset
    bytes           BIGINT,
    src_kind        VARCHAR,   -- Pageable | Pinned | Device | Array | Managed | ...
    dst_kind        VARCHAR,
    correlation_id  BIGINT,
    graph_node_id   BIGINT
);

CREATE TABLE IF NOT EXISTS cuda_api (
    rank            INTEGER,
    tid             BIGINT,
    start_ns        BIGINT,
    end_ns          BIGINT,
    duration_ns     BIGINT,
    name            VARCHAR,   -- ABI suffix stripped: cudaLaunchKernel_v7000 -> cudaLaunchKernel
    correlation_id  BIGINT,
    return_value    BIGINT,
    api_class       VARCHAR    -- runtime | driver | other
);

CREATE TABLE IF NOT EXISTS sync (
    rank            INTEGER,
    device_id       INTEGER,
    stream_id       BIGINT,
    start_ns        BIGINT,
    end_ns          BIGINT,
    duration_ns     BIGINT,
    sync_type       VARCHAR,   -- event | stream_wait_event | stream | context | unknown
    event_id        BIGINT,
    correlation_id  BIGINT
);

CREATE TABLE IF NOT EXISTS nvtx (
    rank        INTEGER,
    tid         BIGINT,
    start_ns    BIGINT,
    end_ns      BIGINT,    -- NULL for marks
    text        VARCHAR,
    domain      VARCHAR,   -- NULL for the default domain or when no domain-create row exists
    event_type  VARCHAR,   -- push_pop | start_end | mark
    payload     VARCHAR    -- JSON payload text where the export has one
);

-- Sampled GPU utilisation from every source, one row per sample of one metric of one GPU:
-- nsys GPU-metrics sampling (--gpu-metrics-devices; names like 'Tensor Active [Throughput %]',
-- values as nsys shows them) and DCGM (dcgm-exporter scrapes, Prometheus query exports,
-- dcgmi dmon tables; names are DCGM field names like DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, values as
-- DCGM reports them: PROF activity 0-1, DEV utilisation %). The live view gpu_metric_samples
-- adds a source-independent metric name and percent (docs/dcgm.md).
CREATE TABLE IF NOT EXISTS gpu_metrics (
    rank          INTEGER,     -- the rank that ran on this GPU; DCGM: NULL unless matched (rank_match)
    gpu_id        INTEGER,     -- nsys: TARGET_INFO_GPU id; DCGM: the `gpu` label (NVML index)
    timestamp_ns  BIGINT,      -- the rank's file time; DCGM: utc_ns - session start of the matched rank
    metric_name   VARCHAR,
    value         DOUBLE,
    source        VARCHAR,     -- nsys | dcgm
    file_id       INTEGER,
    host          VARCHAR,     -- nsys: the traced host; DCGM: Hostname label (else kubernetes_node, instance)
    gpu_uuid      VARCHAR,     -- as the source wrote it (nsys: bare hex, DCGM: GPU-...)
    gpu_name      VARCHAR,     -- DCGM modelName label / nsys TARGET_INFO_GPU name
    gpu_instance  VARCHAR,     -- DCGM GPU_I_ID of a MIG instance; NULL for the whole GPU
    utc_ns        BIGINT,      -- wall-clock time of the sample; NULL for untimed scrapes/dmon rows
    sample        INTEGER,     -- DCGM: scrape (dmon: row) ordinal in the file, from 0
    labels        MAP(VARCHAR, VARCHAR),  -- DCGM: every label of the series as scraped
    rank_match    VARCHAR      -- DCGM: uuid | host+pci_bus_id | host+gpu_index (how rank was found)
);
-- Columns added for DCGM (a workspace made before gets them here; old nsys rows: source NULL = nsys).
ALTER TABLE gpu_metrics ADD COLUMN IF NOT EXISTS source VARCHAR;
ALTER TABLE gpu_metrics ADD COLUMN IF NOT EXISTS file_id INTEGER;
ALTER TABLE gpu_metrics ADD COLUMN IF NOT EXISTS host VARCHAR;
ALTER TABLE gpu_metrics ADD COLUMN IF NOT EXISTS gpu_uuid VARCHAR;
ALTER TABLE gpu_metrics ADD COLUMN IF NOT EXISTS gpu_name VARCHAR;
ALTER TABLE gpu_metrics ADD COLUMN IF NOT EXISTS gpu_instance VARCHAR;
ALTER TABLE gpu_metrics ADD COLUMN IF NOT EXISTS utc_ns BIGINT;
ALTER TABLE gpu_metrics ADD COLUMN IF NOT EXISTS sample INTEGER;
ALTER TABLE gpu_metrics ADD COLUMN IF NOT EXISTS labels MAP(VARCHAR, VARCHAR);
ALTER TABLE gpu_metrics ADD COLUMN IF NOT EXISTS rank_match VARCHAR;

-- Allow-listed captured environment (rank variables, CUDA_VISIBLE_DEVICES, NCCL_*,
-- peak hints). Values of names that look like secrets are never stored.
CREATE TABLE IF NOT EXISTS env (
    file_id  INTEGER,
    name     VARCHAR,
    value    VARCHAR
);

CREATE TABLE IF NOT EXISTS threads (
    rank  INTEGER,
    tid   BIGINT,
    name  VARCHAR
);

-- Device memory in use over time, one row per allocation or free that changed it.
-- Sources: PyTorch-profiler `[memory]` instant events of CUDA devices (profile_memory=True;
-- the caching allocator's running totals) and nsys `--cuda-memory-usage` rows
-- (CUDA_GPU_MEMORY_USAGE_EVENTS of Device / Device Static memory, running sum of the
-- allocations minus the frees seen in the capture, per process and device). queries/
-- memory_peak.sql gives the per-rank peak and its headroom against the GPU's capacity.
CREATE TABLE IF NOT EXISTS memory_usage (
    rank            INTEGER,
    device_id       INTEGER,
    ts_ns           BIGINT,     -- file timeline
    bytes_in_use    BIGINT,     -- allocated after this event (kineto: Total Allocated; nsys: running sum)
    bytes_reserved  BIGINT,     -- kineto: Total Reserved (the caching allocator's pool); NULL when unknown
    source          VARCHAR     -- kineto | nsys
);

-- Run labels (nsight_analyze/run_labels.py): what the user says about the run a file belongs
-- to (name, date, batch=32, tp=2, nodes=8), from run.toml / run.json beside the traces and
-- `ingest --label key=value`; written with the file's rows, in its transaction. A run (job) has
-- the labels of its files; `runs` reads them.
CREATE TABLE IF NOT EXISTS run_labels (
    file_id  INTEGER,
    key      VARCHAR,      -- lower case
    value    VARCHAR,
    source   VARCHAR       -- 'file:PATH' (run.toml / run.json) | 'cli' (--label)
);

-- Analysis settings read by the views (patterns, thresholds). Users change them with
-- `nsight-analyze sql --write "UPDATE settings SET value = ... WHERE key = ..."` or the
-- commands' options; defaults are documented in docs/metrics.md.
CREATE TABLE IF NOT EXISTS settings (key VARCHAR PRIMARY KEY, value VARCHAR, description VARCHAR);
INSERT OR IGNORE INTO settings VALUES
    ('step_pattern', '(?i)^(ProfilerStep#\d+|train_step|step|iteration)\b', 'regex: NVTX ranges that delimit training steps'),
    ('input_pattern', '(?i)(dataloader|data_load|next_data|get_batch|input_pipeline)', 'regex: NVTX ranges of the input pipeline'),
    ('dependency_wait_us', '100', 'an operation that found the GPU idle and started more than this many microseconds after its launch call ended waited on a dependency or a sync, not on the launch (docs/metrics.md "Idle causes")'),
    ('imbalance_balanced_ratio', '1.05', 'median over steps of max/mean compute below which the job is balanced'),
    ('straggler_persistent_share', '0.5', 'share of imbalanced steps one rank must be slowest in to be a persistent straggler'),
    ('job_session_gap_s', '300', 'seconds between capture starts beyond which files belong to different jobs'),
    ('whatif_max_events', '2000', 'collective events (and step ends) the what-if replay replays, first steps first (docs/whatif.md)'),
    ('periodic_steps', 'on', 'on (default): without NVTX steps or optimizer kernels, steps come from a kernel that runs once per step; off: the whole capture (docs/metrics.md)');
