-- CUDA_GPU_MEMORY_USAGE_EVENTS (nsys --cuda-memory-usage=true), copied verbatim from the only real
-- export under ../shared that has it: traces/nsys/pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite
-- (nsys 2022.2.1, export schema 2.9.1; the table is empty there). The synthetic generator writes
-- its `memory-usage` injection rows in this layout, whatever --schema it imitates.
CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (
    start                       INTEGER   NOT NULL,                    -- Event start timestamp (ns).
    globalPid                   INTEGER   NOT NULL,                    -- Serialized GlobalId.
    deviceId                    INTEGER   NOT NULL,                    -- Device ID.
    contextId                   INTEGER   NOT NULL,                    -- Context ID.
    address                     INTEGER   NOT NULL,                    -- Virtual address of the allocation/deallocation.
    pc                          INTEGER   NOT NULL,                    -- Program counter of the allocation/deallocation.
    bytes                       INTEGER   NOT NULL,                    -- Number of bytes allocated/deallocated (B).
    memKind                     INTEGER   NOT NULL,                    -- Type of memory being allocated/deallocated. See enum CUDA_MEMOPR_MEMORY_KIND.
    memoryOperationType         INTEGER   NOT NULL,                    -- 0 if memory was allocated and 1 if memory was deallocated.
    name                        TEXT,                                  -- Variable name, if available.
    correlationId               INTEGER                                -- ID used to identify the API call that launched the event.
);
