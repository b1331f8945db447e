-- Nsight Systems recipe outputs (`nsys recipe NAME` output folders: a NAME.nsys-analysis file
-- beside Parquet files; also read from a .zip holding such folders, e.g. nsys-jax archives).
-- Read by nsight_analyze/sources/nsys_recipe.py; described in docs/nsys-recipes.md.
-- The recipe's numbers are stored as NVIDIA's tool computed them, never recomputed; where
-- our own analysis answers the same question, queries/steps/nvtx_projection_compare.sql puts the
-- two side by side. Columns are only ever added.

-- One row per recipe output folder found in an ingested input, read or not.
CREATE TABLE IF NOT EXISTS recipe_outputs (
    file_id           INTEGER,     -- files.file_id of the folder or zip it came from
    output            VARCHAR,     -- the folder's path inside the input ('.' for the input itself)
    recipe            VARCHAR,     -- RecipeName of the .nsys-analysis file, e.g. nvtx_gpu_proj_trace
    display_name      VARCHAR,     -- DisplayName, e.g. 'NVTX GPU Projection Trace'
    recipe_version    VARCHAR,     -- RecipeJsonVersion / RecipeRuntimeVersion
    run_start         VARCHAR,     -- StartTime of the recipe run (when the recipe ran, not the capture)
    run_end           VARCHAR,     -- EndTime of the recipe run
    input_files       VARCHAR[],   -- InputFiles: the reports the recipe read
    status            VARCHAR,     -- read | not read
    rows_read         BIGINT,      -- rows stored from it (0 when not read)
    reason            VARCHAR      -- why not read (recipe without a documented layout, ...)
);

-- nvtx_gpu_proj_trace/trace.parquet: NVTX ranges projected onto the GPU by the recipe, one
-- row per projected range. Times are integer ns on the report's own timeline (the same
-- session-relative clock as an nsys SQLite export of that report).
CREATE TABLE IF NOT EXISTS recipe_nvtx_gpu_proj (
    rank                   INTEGER,   -- our rank (ranks.rank) of the process the row belongs to
    file_id                INTEGER,
    output                 VARCHAR,   -- recipe_outputs.output it came from
    recipe_rank            INTEGER,   -- the recipe's `Rank` column (index of the report among its inputs)
    name                   VARCHAR,   -- `Name`: range text (NULL for the one row per process the
                                      -- recipe writes without a CPU range)
    projected_start_ns     BIGINT,    -- `Projected Start`: start of the first GPU op launched in the range
    projected_duration_ns  BIGINT,    -- `Projected Duration`
    projected_end_ns       BIGINT,    -- projected_start_ns + projected_duration_ns
    orig_start_ns          BIGINT,    -- `Orig Start`: CPU range start (NULL when the recipe has none)
    orig_duration_ns       BIGINT,    -- `Orig Duration`
    orig_end_ns            BIGINT,    -- orig_start_ns + orig_duration_ns
    style                  VARCHAR,   -- `Style`: PushPop | StartEnd
    pid                    BIGINT,    -- `PID`
    tid                    BIGINT,    -- `TID`
    num_gpu_ops            BIGINT,    -- `NumGPUOps`: kernels, memcpys and memsets launched in the range
    level                  INTEGER,   -- `Lvl`: nesting depth (0 = outermost)
    num_children           BIGINT,    -- `NumChild`
    range_id               BIGINT,    -- `RangeId`
    parent_id              BIGINT,    -- `ParentId` (NULL for outermost ranges)
    range_stack            VARCHAR    -- `RangeStack`: ':'-separated RangeIds from the outermost range down
);
