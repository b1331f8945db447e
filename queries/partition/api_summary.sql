-- api_summary: per rank and CUDA API function, call count and time (nsys `cudaapisum` parity).
-- Why: host-side time in the CUDA runtime/driver (launch overhead, synchronisation, allocation)
-- explains idle GPUs that kernel statistics cannot.
-- Columns:
--   rank INTEGER, name VARCHAR (API name, ABI suffix stripped: cudaLaunchKernel_v7000 ->
--   cudaLaunchKernel), calls BIGINT, total_ns BIGINT ns, avg_ns DOUBLE ns, med_ns DOUBLE ns,
--   min_ns BIGINT ns, max_ns BIGINT ns, stddev_ns DOUBLE ns,
--   pct DOUBLE % (share of the rank's summed API time), api_class VARCHAR (runtime | driver | other)
-- Definition: runtime and driver calls together; duration = end_ns - start_ns; med = ordinary
--   median; stddev = sample standard deviation (n - 1), 0 for a single call.
--   Differences from nsys 2022.4: per rank, not per file (processes that ran no GPU work are not
--   ranks, so their calls are not here), and every `_vNNNN+` suffix is stripped where nsys strips
--   exactly four digits (nsys keeps cudaEventRecordWithFlags_v11010).
-- columns: rank, name, calls, total_ns, avg_ns, med_ns, min_ns, max_ns, stddev_ns, pct, api_class
-- stage: rank
-- result: stored
-- requires: cuda_api
CREATE OR REPLACE VIEW api_summary AS
WITH a AS (
    SELECT rank, name, api_class, end_ns - start_ns AS d
    FROM cuda_api
)
SELECT
    rank,
    name,
    count(*) AS calls,
    CAST(sum(d) AS BIGINT) AS total_ns,
    avg(d) AS avg_ns,
    CAST(median(d) AS DOUBLE) AS med_ns,
    min(d) AS min_ns,
    max(d) AS max_ns,
    coalesce(stddev_samp(d), 0.0) AS stddev_ns,
    100.0 * sum(d) / NULLIF(sum(sum(d)) OVER (PARTITION BY rank), 0) AS pct,
    mode(api_class) AS api_class
FROM a
GROUP BY rank, name
ORDER BY rank, total_ns DESC, name;
