-- rank_attribution: per rank and step (and for the whole job), why the rank is slower than the median rank.
-- Why: `ranks` names a straggler; the next question is its cause: a slow GPU (the same kernels take
-- longer), more work (more kernels), a slow host (launch gaps, host-bound idle), late input (input
-- stalls) or slow links (the same collectives' transfers take longer). See docs/whatif.md.
-- Columns (ns unless said; each cause is this rank's excess over the median rank, may be < 0):
--   job INTEGER, rank INTEGER, step BIGINT (NULL = the whole job: sums over the steps),
--   excess_ns BIGINT (sum of the positive causes), slow_gpu_ns BIGINT, more_work_ns BIGINT,
--   slow_host_ns BIGINT, late_input_ns BIGINT, slow_link_ns BIGINT,
--   gpu_score DOUBLE (nvidia-resiliency-ext style: over kernels (name, launch shape) every rank runs, the minimum over
--   ranks of the median duration / this rank's median, weighted by instances × mean; 1 = fastest),
--   kernels_compared BIGINT (kernels in that score), kernel_count BIGINT, median_kernel_count DOUBLE,
--   host_gap_ns BIGINT (launch_gap + host_bound idle), median_host_gap_ns DOUBLE,
--   input_stall_ns BIGINT, median_input_stall_ns DOUBLE,
--   transfer_ns BIGINT (summed end - last arrival of the rank's complete collectives),
--   median_transfer_ns DOUBLE (the same with each instance's median participant), n_collectives BIGINT,
--   transfer_bytes BIGINT, threshold_ns DOUBLE (3 % of the median rank's window), cause VARCHAR
--   (slow-gpu | more-work | slow-host | late-input | slow-link: the largest cause when it reaches
--   threshold_ns, else NULL).
-- Definition: per step and kernel name (non-communication kernels, rank_step_work), with n = instances
--   and a = mean duration, medians over the job's ranks that have the step (a rank without the name
--   counts n = 0): slow_gpu = Σ over kernels run as often as by the median rank of n (a - median a);
--   more_work = Σ over the other kernels of (n a - median n · median a): kernels of one name may have
--   several sizes, so a different count changes the mix and only the whole difference is work.
--   gpu_score compares kernels every rank runs equally often. slow_host,
--   late_input: time_partition's idle causes minus the median rank's. slow_link = Σ over complete
--   collectives of the rank's transfer (aligned end - the instance's last arrival) - the instance's
--   median participant's. Whole-job rows sum the steps; their gpu_score is the steps' scores weighted
--   by their weights, kernels_compared the most of any step. A kernel is a (name, launch shape).
-- columns: job, rank, step, excess_ns, slow_gpu_ns, more_work_ns, slow_host_ns, late_input_ns, slow_link_ns, gpu_score, kernels_compared, kernel_count, median_kernel_count, host_gap_ns, median_host_gap_ns, input_stall_ns, median_input_stall_ns, transfer_ns, median_transfer_ns, n_collectives, transfer_bytes, threshold_ns, cause
-- stage: job
-- result: stored
-- requires: merge_coll_members, merge_rank_clock, rank_step_work, steps, time_partition
CREATE OR REPLACE VIEW rank_attribution AS
WITH ra_rk AS (
    SELECT rank, job, clock_offset_ns AS off FROM merge_rank_clock
),
ra_st AS MATERIALIZED (
    SELECT rk.job, tp.rank, tp.step, tp.window_ns,
           tp.launch_gap_ns + tp.host_bound_ns AS host_ns, tp.input_stall_ns
    FROM time_partition AS tp JOIN ra_rk AS rk USING (rank)
    WHERE tp.step IS NOT NULL
),
ra_w AS MATERIALIZED (
    SELECT st.job, st.rank, st.step, w.name || ' ' || w.launch AS name, w.instances, w.avg_ns, w.med_ns
    FROM rank_step_work AS w JOIN ra_st AS st USING (rank, step)
),
ra_grid AS (
    SELECT st.job, st.rank, st.step, nm.name,
           coalesce(w.instances, 0) AS n, w.avg_ns, w.med_ns
    FROM ra_st AS st
    JOIN (SELECT DISTINCT job, step, name FROM ra_w) AS nm ON nm.job = st.job AND nm.step = st.step
    LEFT JOIN ra_w AS w ON w.job = st.job AND w.rank = st.rank AND w.step = st.step AND w.name = nm.name
),
ra_ref AS (
    SELECT job, step, name, median(n) AS n_ref, median(avg_ns) AS a_ref, min(med_ns) AS med_min,
           count(med_ns) = count(*) AND min(n) = max(n) AS everyone
    FROM ra_grid GROUP BY job, step, name
),
ra_work AS (
    SELECT g.job, g.rank, g.step,
           -- each kernel's term as DECIMAL: a sum of DOUBLEs depends on the order of its terms
           -- (1 ns apart between two recomputes once rounded), a sum of DECIMALs does not (so
           -- for gpu_score's sums too: they differed in the last bit when the groups' order did)
           sum(CASE WHEN g.n = r.n_ref AND g.n > 0 THEN (g.n * (g.avg_ns - r.a_ref))::DECIMAL(38, 3) ELSE 0 END)
               AS slow_gpu_ns,
           sum(CASE WHEN g.n <> r.n_ref THEN (coalesce(g.n * g.avg_ns, 0) - r.n_ref * r.a_ref)::DECIMAL(38, 3)
                    ELSE 0 END) AS more_work_ns,
           (sum(CASE WHEN r.everyone AND g.med_ns > 0 THEN (g.n * g.avg_ns * r.med_min / g.med_ns)::DECIMAL(38, 6) END)
               / nullif(sum(CASE WHEN r.everyone AND g.med_ns > 0 THEN (g.n * g.avg_ns)::DECIMAL(38, 6) END), 0))::DOUBLE
               AS gpu_score,
           sum(CASE WHEN r.everyone AND g.med_ns > 0 THEN (g.n * g.avg_ns)::DECIMAL(38, 6) END) AS score_w,
           count(*) FILTER (WHERE r.everyone) AS kernels_compared,
           sum(g.n) AS kernel_count,
           sum(r.n_ref) AS median_kernel_count
    FROM ra_grid AS g JOIN ra_ref AS r USING (job, step, name)
    GROUP BY g.job, g.rank, g.step
),
ra_cm AS MATERIALIZED (
    SELECT rk.job, m.rank, m.coll_id, m.aligned_end_ns - m.last_arrive_ns AS x, m.bytes,
           m.arrive_ns - rk.off AS local_arrive
    FROM merge_coll_members AS m JOIN ra_rk AS rk USING (rank)
    WHERE m.complete
),
ra_link AS (
    SELECT c.job, c.rank, s.step,
           sum(c.x - r.x_ref) AS slow_link_ns, sum(c.x) AS transfer_ns, sum(r.x_ref) AS median_transfer_ns,
           count(*) AS n_collectives, sum(c.bytes) AS transfer_bytes
    FROM ra_cm AS c
    JOIN (SELECT coll_id, median(x) AS x_ref FROM ra_cm GROUP BY coll_id) AS r USING (coll_id)
    JOIN steps AS s ON s.rank = c.rank AND c.local_arrive >= s.start_ns AND c.local_arrive < s.end_ns
    WHERE s.step IS NOT NULL
    GROUP BY c.job, c.rank, s.step
),
ra_host AS (
    SELECT st.*,
           median(host_ns) OVER (PARTITION BY job, step) AS median_host_gap_ns,
           median(input_stall_ns) OVER (PARTITION BY job, step) AS median_input_stall_ns,
           median(window_ns) OVER (PARTITION BY job, step) AS median_window_ns
    FROM ra_st AS st
),
ra_step AS (
    SELECT h.job, h.rank, h.step,
           coalesce(w.slow_gpu_ns, 0) AS slow_gpu_ns, coalesce(w.more_work_ns, 0) AS more_work_ns,
           h.host_ns - h.median_host_gap_ns AS slow_host_ns,
           h.input_stall_ns - h.median_input_stall_ns AS late_input_ns,
           coalesce(l.slow_link_ns, 0) AS slow_link_ns,
           w.gpu_score, w.score_w, coalesce(w.kernels_compared, 0) AS kernels_compared,
           coalesce(w.kernel_count, 0) AS kernel_count, coalesce(w.median_kernel_count, 0) AS median_kernel_count,
           h.host_ns AS host_gap_ns, h.median_host_gap_ns, h.input_stall_ns, h.median_input_stall_ns,
           coalesce(l.transfer_ns, 0) AS transfer_ns, coalesce(l.median_transfer_ns, 0) AS median_transfer_ns,
           coalesce(l.n_collectives, 0) AS n_collectives, l.transfer_bytes,
           h.median_window_ns
    FROM ra_host AS h
    LEFT JOIN ra_work AS w USING (job, rank, step)
    LEFT JOIN ra_link AS l USING (job, rank, step)
),
ra_all AS (
    SELECT job, rank, step, slow_gpu_ns, more_work_ns, slow_host_ns, late_input_ns, slow_link_ns, gpu_score,
           kernels_compared, kernel_count, median_kernel_count, host_gap_ns, median_host_gap_ns, input_stall_ns,
           median_input_stall_ns, transfer_ns, median_transfer_ns, n_collectives, transfer_bytes,
           0.03 * median_window_ns AS threshold_ns
    FROM ra_step
    UNION ALL
    SELECT s.job, s.rank, NULL, sum(slow_gpu_ns), sum(more_work_ns), sum(slow_host_ns), sum(late_input_ns),
           sum(slow_link_ns), (sum((gpu_score * score_w)::DECIMAL(38, 6)) / nullif(sum(score_w), 0))::DOUBLE,
           max(kernels_compared),
           sum(kernel_count),
           sum(median_kernel_count), sum(host_gap_ns), sum(median_host_gap_ns), sum(input_stall_ns),
           sum(median_input_stall_ns), sum(transfer_ns), sum(median_transfer_ns), sum(n_collectives),
           sum(transfer_bytes), 0.03 * sum(median_window_ns)
    FROM ra_step AS s
    GROUP BY s.job, s.rank
),
ra_top AS (
    SELECT *,
           greatest(slow_gpu_ns, more_work_ns, slow_host_ns, late_input_ns, slow_link_ns) AS top_ns
    FROM ra_all
)
SELECT
    job::INTEGER AS job, rank::INTEGER AS rank, step::BIGINT AS step,
    (greatest(slow_gpu_ns, 0) + greatest(more_work_ns, 0) + greatest(slow_host_ns, 0)
        + greatest(late_input_ns, 0) + greatest(slow_link_ns, 0))::BIGINT AS excess_ns,
    slow_gpu_ns::BIGINT AS slow_gpu_ns, more_work_ns::BIGINT AS more_work_ns,
    slow_host_ns::BIGINT AS slow_host_ns, late_input_ns::BIGINT AS late_input_ns,
    slow_link_ns::BIGINT AS slow_link_ns,
    gpu_score::DOUBLE AS gpu_score, kernels_compared::BIGINT AS kernels_compared,
    kernel_count::BIGINT AS kernel_count, median_kernel_count::DOUBLE AS median_kernel_count,
    host_gap_ns::BIGINT AS host_gap_ns, median_host_gap_ns::DOUBLE AS median_host_gap_ns,
    input_stall_ns::BIGINT AS input_stall_ns, median_input_stall_ns::DOUBLE AS median_input_stall_ns,
    transfer_ns::BIGINT AS transfer_ns, median_transfer_ns::DOUBLE AS median_transfer_ns,
    n_collectives::BIGINT AS n_collectives, transfer_bytes::BIGINT AS transfer_bytes,
    threshold_ns::DOUBLE AS threshold_ns,
    CASE
        WHEN top_ns IS NULL OR top_ns < threshold_ns THEN NULL
        WHEN top_ns = slow_gpu_ns THEN 'slow-gpu'
        WHEN top_ns = more_work_ns THEN 'more-work'
        WHEN top_ns = slow_host_ns THEN 'slow-host'
        WHEN top_ns = late_input_ns THEN 'late-input'
        ELSE 'slow-link'
    END AS cause
FROM ra_top;
