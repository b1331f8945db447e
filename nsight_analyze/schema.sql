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
    source_format    VARCHAR,      -- nsys-sqlite | kineto-json | ncu-csv | ncu-rep
    nsys_version     VARCHAR,      -- EXPORT_PRODUCT_VERSION, NULL for pre-2022 exports
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
    job                   INTEGER,     -- 1-based job id, set by the job step (queries/merge_jobs.sql)
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

CREATE TABLE IF NOT EXISTS gpu_metrics (
    rank          INTEGER,
    gpu_id        INTEGER,
    timestamp_ns  BIGINT,
    metric_name   VARCHAR,
    value         DOUBLE
);

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

-- Analysis settings read by the views (patterns, thresholds). Users change them with
-- `nsight-analyze sql --write "UPDATE settings SET value = ... WHERE key = ..."` or the
-- commands' options; defaults are documented in docs/metrics.md.
CREATE TABLE IF NOT EXISTS settings (key VARCHAR PRIMARY KEY, value VARCHAR, description VARCHAR);
INSERT OR IGNORE INTO settings VALUES
    ('step_pattern', '(?i)^(ProfilerStep#\d+|train_step|step|iteration)\b', 'regex: NVTX ranges that delimit training steps'),
    ('input_pattern', '(?i)(dataloader|data_load|next_data|get_batch|input_pipeline)', 'regex: NVTX ranges of the input pipeline'),
    ('imbalance_balanced_ratio', '1.05', 'median over steps of max/mean compute below which the job is balanced'),
    ('straggler_persistent_share', '0.5', 'share of imbalanced steps one rank must be slowest in to be a persistent straggler'),
    ('job_session_gap_s', '300', 'seconds between capture starts beyond which files belong to different jobs');
