-- The statements of the rank merger: job identity and clock alignment (nsight_analyze/ranks.py).

-- name: assign_jobs
-- Copy merge_jobs' job into ranks.job.
UPDATE ranks SET job = j.job FROM merge_jobs AS j WHERE j.rank = ranks.rank

-- name: jobs
-- One row per job: what ingest's note says about it.
SELECT job, ranks, world_size, complete, first_rank, last_rank, label FROM jobs ORDER BY job

-- name: job_session_gap_s
-- settings.job_session_gap_s: how far apart two captures are different jobs.
SELECT TRY_CAST(value AS DOUBLE) FROM settings WHERE key = 'job_session_gap_s'

-- name: coarse_alignment
-- Every rank placed by its session start relative to the earliest one of its job (UTC shift).
UPDATE ranks SET
    clock_offset_ns = COALESCE(ranks.session_start_utc_ns - j.t0, 0),
    alignment_method = CASE WHEN ranks.session_start_utc_ns IS NULL THEN 'none'
                            ELSE 'session-start' END
FROM (SELECT COALESCE(job, 1) AS job, MIN(session_start_utc_ns) AS t0 FROM ranks GROUP BY ALL) AS j
WHERE j.job = COALESCE(ranks.job, 1)

-- name: ranks_without_session_start
-- Ranks without a session start in a job where some rank has one.
SELECT rank FROM ranks r WHERE session_start_utc_ns IS NULL AND EXISTS (
    SELECT 1 FROM ranks o WHERE COALESCE(o.job, 1) = COALESCE(r.job, 1)
    AND o.session_start_utc_ns IS NOT NULL)
ORDER BY rank

-- name: per_host_ends
-- Per matched instance spanning >= 2 hosts: each host's median end (coarse-aligned).
CREATE OR REPLACE TEMP TABLE merge_tmp_per_host AS
SELECT job, op, comm, seq, host, MEDIAN(aligned_end_ns)::DOUBLE AS e
FROM merge_coll_members
WHERE n_hosts >= 2 AND complete
GROUP BY job, op, comm, seq, host

-- name: series_spread
-- Per (op, comm) series: the largest interquartile range over the hosts of its per-instance end
-- deviation, and whether it is at most $max_spread_ns (MAX_SERIES_SPREAD_NS): steady.
CREATE OR REPLACE TEMP TABLE merge_tmp_series AS
WITH inst AS (SELECT job, op, comm, seq, MEDIAN(e) AS m FROM merge_tmp_per_host GROUP BY ALL),
dev AS (
    SELECT p.job, p.op, p.comm, p.host, p.e - i.m AS d
    FROM merge_tmp_per_host AS p JOIN inst AS i USING (job, op, comm, seq)
),
iqr AS (
    SELECT job, op, comm, host, QUANTILE_CONT(d, 0.75) - QUANTILE_CONT(d, 0.25) AS iqr
    FROM dev GROUP BY ALL
)
SELECT job, op, comm, MAX(iqr) AS spread_ns, MAX(iqr) <= $max_spread_ns AS steady
FROM iqr GROUP BY ALL

-- name: steady_host_ends
-- The host ends of the steady series, numbered by instance.
CREATE OR REPLACE TEMP TABLE merge_tmp_host_ends AS
SELECT DENSE_RANK() OVER (ORDER BY p.job, p.op, p.comm, p.seq) AS inst, p.job, p.host, p.e
FROM merge_tmp_per_host AS p
JOIN merge_tmp_series AS s ON s.job = p.job AND s.op = p.op AND s.comm = p.comm AND s.steady

-- name: unsteady_series
SELECT op, comm, spread_ns FROM merge_tmp_series WHERE NOT steady ORDER BY job, op, comm

-- name: zero_corrections
-- The solver's start: no correction for any (job, host).
CREATE OR REPLACE TEMP TABLE merge_tmp_corr AS
SELECT DISTINCT job, host, 0.0::DOUBLE AS c FROM merge_tmp_host_ends

-- name: next_corrections
-- One step of the fixed point c_h <- c_h + median_i(median_h'(e_ih' + c_h') - (e_ih + c_h)).
CREATE OR REPLACE TEMP TABLE merge_tmp_next AS
WITH x AS (
    SELECT e.inst, e.job, e.host, e.e + c.c AS x, c.c
    FROM merge_tmp_host_ends AS e JOIN merge_tmp_corr AS c USING (job, host)
),
m AS (SELECT inst, MEDIAN(x) AS m FROM x GROUP BY inst)
SELECT job, host, ANY_VALUE(c) + MEDIAN(m - x) AS c, ABS(MEDIAN(m - x)) AS delta
FROM x JOIN m USING (inst)
GROUP BY job, host

-- name: take_corrections
CREATE OR REPLACE TEMP TABLE merge_tmp_corr AS SELECT job, host, c FROM merge_tmp_next

-- name: applied_correction
-- A host's correction in end_mismatch_p50 (0 without one).
COALESCE(c.c, 0)

-- name: end_mismatch_p50
-- Per job: median |host end - instance median|, each end moved by $correction.
WITH x AS (
    SELECT e.inst, e.job, e.e + $correction AS x
    FROM merge_tmp_host_ends AS e LEFT JOIN merge_tmp_corr AS c USING (job, host)
), m AS (SELECT inst, MEDIAN(x) AS m FROM x GROUP BY inst)
SELECT job, MEDIAN(ABS(x - m)) FROM x JOIN m USING (inst) GROUP BY job

-- name: rank_host
-- A rank's host: its host name, else one per file.
COALESCE(hostname, 'file' || CAST(file_id AS VARCHAR))

-- name: job_hosts
-- The (job, host) pairs of the jobs with two hosts or more ($host: rank_host).
SELECT job, host FROM (
    SELECT DISTINCT COALESCE(job, 1) AS job, $host AS host FROM ranks)
QUALIFY COUNT(*) OVER (PARTITION BY job) >= 2 ORDER BY ALL

-- name: job_count
SELECT COUNT(DISTINCT COALESCE(job, 1)) FROM ranks

-- name: gauged_corrections
-- Gauge: per job, the host of the lowest rank (among the refined ones) keeps its session-start
-- placement ($host: rank_host).
CREATE OR REPLACE TEMP TABLE merge_tmp_next AS
WITH ref AS (
    SELECT COALESCE(r.job, 1) AS job, ARG_MIN($host, r.rank) AS host
    FROM ranks AS r JOIN merge_tmp_corr AS c ON c.job = COALESCE(r.job, 1) AND c.host = $host
    GROUP BY ALL
)
SELECT c.job, c.host, CAST(ROUND(c.c - g.c) AS BIGINT) AS corr, c.c - g.c AS delta
FROM merge_tmp_corr AS c
JOIN ref USING (job)
JOIN merge_tmp_corr AS g ON g.job = ref.job AND g.host = ref.host

-- name: apply_corrections
-- Each refined host's ranks moved by its correction ($host: rank_host).
UPDATE ranks SET
    clock_offset_ns = ranks.clock_offset_ns + k.corr,
    alignment_method = 'collectives'
FROM merge_tmp_next AS k
WHERE k.job = COALESCE(ranks.job, 1) AND k.host = $host

-- name: suspicious_corrections
-- The hosts moved by more than $max_correction_ns (SUSPICIOUS_CORRECTION_NS).
SELECT job, host FROM merge_tmp_next WHERE ABS(delta) > $max_correction_ns ORDER BY ALL

-- name: job_collectives
-- A job's NCCL kernels matched, and those of complete instances across >= 2 hosts.
SELECT COUNT(*), COUNT(*) FILTER (WHERE complete AND n_hosts >= 2) FROM merge_coll_members
WHERE job = $job

-- name: partial_job_label
SELECT label FROM jobs WHERE job = $job AND NOT complete
