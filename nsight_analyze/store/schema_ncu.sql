-- Nsight Compute tables (ncu --csv [--page raw] exports and .ncu-rep reports).
-- ncu data is not per rank: rows are keyed by file_id and a launch ordinal. The views
-- hfu_ncu_flops, roofline and hfu_timeline_flops (queries/) turn them into FLOPs, arithmetic
-- intensity and timeline matches. Columns are only ever added.

-- One row per profiled kernel launch.
CREATE TABLE IF NOT EXISTS ncu_kernels (
    file_id               INTEGER,
    launch_id             INTEGER,     -- ncu's "ID" (CSV) or the action ordinal (.ncu-rep), per file
    name                  VARCHAR,     -- demangled kernel name as ncu printed it
    short_name            VARCHAR,     -- function name without template arguments/signature
    match_key             VARCHAR,     -- normalised name used to match nsys kernels (see hfu_timeline_flops)
    process_id            BIGINT,
    process_name          VARCHAR,
    host_name             VARCHAR,
    context_id            BIGINT,
    stream_id             BIGINT,
    device_id             INTEGER,
    grid_x INTEGER, grid_y INTEGER, grid_z INTEGER,
    block_x INTEGER, block_y INTEGER, block_z INTEGER,
    grid_size             BIGINT,      -- blocks per grid (product), when only that is known
    block_size            BIGINT,      -- threads per block (product)
    registers_per_thread  INTEGER,
    duration_ns           BIGINT,      -- gpu__time_duration.sum (under ncu's clock control)
    gpu_name              VARCHAR,     -- device__attribute_display_name, NULL when the file lacks it
    sm_count              INTEGER,
    clock_hz              BIGINT,      -- device__attribute_max_gpu_frequency_khz * 1000
    compute_major         INTEGER,
    compute_minor         INTEGER
);

-- Every metric value of every launch, in base units (bytes, cycles, instructions, ns).
CREATE TABLE IF NOT EXISTS ncu_metrics (
    file_id     INTEGER,
    launch_id   INTEGER,
    section     VARCHAR,     -- CSV "Section Name"; NULL for raw-page and .ncu-rep values
    metric      VARCHAR,     -- metric name (e.g. dram__bytes.sum) or the section's display name
    unit        VARCHAR,     -- unit after normalisation (byte, cycle, inst, ns, %, ...)
    value       DOUBLE,      -- NULL when not numeric or n/a
    value_text  VARCHAR      -- the value as written, for strings and auditing
);

-- Dense peaks of the GPU a hardware-counter file was captured on (for the roofline's ridge
-- point): each ncu file, and each Kineto trace with CUPTI range-profiler counters (its rank's
-- GPU); resolved at ingest by nsight_analyze.gpus (table, derived, or assumed from kernel names).
CREATE TABLE IF NOT EXISTS ncu_peaks (
    file_id      INTEGER,
    precision    VARCHAR,    -- fp64 | fp64_tc | fp32 | tf32 | bf16 | fp16 | fp8 | int8
    peak_flops   DOUBLE,     -- dense FLOP/s (OP/s for int8)
    mem_bw_bps   DOUBLE,     -- DRAM bandwidth, bytes/s
    source       VARCHAR,    -- table | derived | assumed | unknown
    reason       VARCHAR
);
