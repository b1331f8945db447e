-- memory_peak: peak device memory per rank and its headroom against the GPU's capacity.
-- Purpose: whether memory leaves room for a larger batch or less activation checkpointing (the
--   fixes that need memory say so from this table, rules/advice.py memory_fit).
-- Inputs: memory_usage (PyTorch-profiler [memory] events: the caching allocator's Total Allocated
--   and Total Reserved; nsys --cuda-memory-usage: running sum of the capture's device allocations),
--   the rank's GPU (gpus.memory_bytes as the trace recorded it: TARGET_INFO_GPU.totalMemory or
--   Kineto deviceProperties.totalGlobalMem).
-- Capacity: recorded bytes when the trace has them ('recorded'); else the nominal size in the GPU's
--   name ('80GB' -> 80e9 bytes, below the real size, so headroom is not overstated: 'name');
--   else NULL ('unknown'): headroom is then unknown, never guessed.
-- Columns:
--   rank, device_id, source        one row per rank, device and memory_usage source
--   samples                        memory_usage rows
--   peak_bytes_in_use   byte       max bytes_in_use (kineto: max Total Allocated)
--   peak_ts_ns          ns         first time the peak was reached (file timeline)
--   peak_bytes_reserved byte       max bytes_reserved (kineto's caching-allocator pool; NULL for nsys)
--   capacity_bytes      byte       the GPU's memory (see Capacity)
--   capacity_source                recorded | name | unknown
--   headroom_bytes      byte       capacity - peak_bytes_in_use (NULL when capacity is unknown)
--   headroom_reserved_bytes byte   capacity - peak_bytes_reserved: what the process had not taken
--   used_pct            %          100 * peak_bytes_in_use / capacity
-- Not counted: the CUDA context and libraries' workspaces outside the allocator (a few hundred MB),
--   and (nsys) allocations made before the capture started.
-- columns: rank, device_id, source, samples, peak_bytes_in_use, peak_ts_ns, peak_bytes_reserved, capacity_bytes, capacity_source, headroom_bytes, headroom_reserved_bytes, used_pct
-- stage: rank
-- result: stored
-- requires: memory_usage, gpus, ranks
CREATE OR REPLACE VIEW memory_peak AS
WITH peaks AS (
    SELECT rank, device_id, source, count(*) AS samples,
        max(bytes_in_use) AS peak_bytes_in_use,
        arg_min(ts_ns, (-bytes_in_use, ts_ns)) AS peak_ts_ns,
        max(bytes_reserved) AS peak_bytes_reserved
    FROM memory_usage GROUP BY ALL
),
gpu AS (  -- the GPU of each (rank, device): its own row, else the rank's device row, else any row
    SELECT p.rank, p.device_id, p.source,
        arg_min(g.memory_bytes, (g.device_id IS DISTINCT FROM p.device_id, g.device_id IS DISTINCT FROM r.device_id,
                                 g.memory_bytes IS NULL, g.device_id)) AS memory_bytes,
        arg_min(coalesce(g.name, r.gpu_name), (g.device_id IS DISTINCT FROM p.device_id,
                                 g.device_id IS DISTINCT FROM r.device_id, g.name IS NULL, g.device_id)) AS name
    FROM peaks p
    LEFT JOIN ranks r ON r.rank = p.rank
    LEFT JOIN gpus g ON g.rank = p.rank
    GROUP BY ALL
),
cap AS (
    SELECT rank, device_id, source,
        coalesce(memory_bytes,
                 TRY_CAST(regexp_extract(name, '(?i)(\d+)\s*GB\b', 1) AS BIGINT) * 1000000000) AS capacity_bytes,
        CASE WHEN memory_bytes IS NOT NULL THEN 'recorded'
             WHEN regexp_matches(coalesce(name, ''), '(?i)\d+\s*GB\b') THEN 'name'
             ELSE 'unknown' END AS capacity_source
    FROM gpu
)
SELECT p.rank, p.device_id, p.source, p.samples, p.peak_bytes_in_use, p.peak_ts_ns, p.peak_bytes_reserved,
    c.capacity_bytes, c.capacity_source,
    c.capacity_bytes - p.peak_bytes_in_use AS headroom_bytes,
    c.capacity_bytes - p.peak_bytes_reserved AS headroom_reserved_bytes,
    100.0 * p.peak_bytes_in_use / nullif(c.capacity_bytes, 0) AS used_pct
FROM peaks p
LEFT JOIN cap c ON c.rank = p.rank AND c.device_id IS NOT DISTINCT FROM p.device_id AND c.source = p.source;
