-- whatif: per step and for the whole job, the job's step time if a cause of lost time went away.
-- Why: a list of causes does not say which fix pays; replaying the measured dependencies with one
-- cause removed does, and waiting ranks gain only what the critical path gains (docs/whatif.md).
-- Columns: job INTEGER, scenario VARCHAR (slowest-rank-at-median | comms-hidden | no-input-stalls |
--   no-launch-gaps | no-sync-stalls), step BIGINT (NULL = the whole job: means over the steps),
--   actual_step_time_ns BIGINT ns (measured: the longest step window over the ranks),
--   replayed_actual_ns BIGINT ns (the replay with nothing removed; equals the measured time when the
--   dependency model holds), step_time_ns BIGINT ns (the replay with the cause removed),
--   gain_ns BIGINT ns (replayed_actual_ns - step_time_ns), fixed_ranks VARCHAR (slowest-rank-at-median:
--   the ranks replaced by the median rank, comma-separated; NULL otherwise).
-- Definition: jobs with every rank present (jobs.complete); steps every rank of the job has; collective instances (merge_coll_members; an
--   unmatched or partial one couples only the participants present) whose participants all place
--   them in the same step. Per rank and step, its own work is cut at its
--   collectives: ready_j = the collective's start, or, when it started within 5 µs of its previous
--   collective's end (queued behind it), the end of its own non-communication operation at the
--   position (counted from the step's end) after which the participants that did not queue started
--   (SPMD: the same work precedes a collective on every rank), else of the GPU work launched before
--   it (rank_coll_ready);
--   offsets are measured from the rank's anchor: the step start, or the end of the latest collective
--   its work waited for (rank_coll_ready.waits: its GPU idled until that end);
--   x_j = its end - the instance's last arrival (the transfer); after the last collective,
--   post = window end - max(last collective end, work launched before it). Replay, in event order:
--   arrival = max(anchor + (ready_j - measured anchor), previous collective end + queue gap);
--   end = max arrival over participants + x_j (a collective the work waited for is the new anchor);
--   step end = max(last end, anchor + own work) + post; the next step starts (and anchors) there.
--   The recurrence is sequential: _whatif_inputs computes what it reads, nsight_analyze/replay.py runs
--   it (one pass over the events vectorised over the ranks; a recursive CTE costs ranks x events^2) into
--   _whatif_replayed, between the two queries; only the first steps whose events (collectives + 1 per step)
--   start within settings.whatif_max_events (default 2000) are replayed; later steps have no rows and
--   the whole-job row is the mean over the replayed steps.
--   Scenarios: slowest-rank-at-median replaces the offsets, transfers and post of the ranks
--   rank_attribution blames (else of the rank with the largest excess, the lowest on ties) by
--   the median of the other ranks'; comms-hidden sets transfers and queue gaps to 0;
--   no-input-stalls, no-launch-gaps, no-sync-stalls take the idle of that cause (gaps:
--   input_stall; launch_gap and host_bound, the GPU waiting for the host to issue work;
--   sync_stall) between the anchor and each point out of it.
-- columns: job, scenario, step, actual_step_time_ns, replayed_actual_ns, step_time_ns, gain_ns, fixed_ranks
-- stage: job
-- result: stored
-- requires: _whatif_inputs, _whatif_replayed
CREATE OR REPLACE VIEW whatif AS
WITH wi_steps AS (
    SELECT job, scenario, step, step_ns FROM _whatif_replayed WHERE step_ns IS NOT NULL
),
wi_actual AS (
    SELECT job, step, any_value(actual_ns) AS actual_ns
    FROM _whatif_inputs WHERE is_end AND scenario = 'actual' GROUP BY job, step
),
wi_rows AS (
    SELECT s.job, s.scenario, s.step, a.actual_ns, r.step_ns AS replayed_ns, s.step_ns
    FROM wi_steps AS s
    JOIN wi_steps AS r ON r.job = s.job AND r.step = s.step AND r.scenario = 'actual'
    JOIN wi_actual AS a ON a.job = s.job AND a.step = s.step
    WHERE s.scenario <> 'actual'
),
wi_all AS (
    SELECT * FROM wi_rows
    UNION ALL
    SELECT job, scenario, NULL, avg(actual_ns), avg(replayed_ns), avg(step_ns) FROM wi_rows GROUP BY job, scenario
)
SELECT
    a.job::INTEGER AS job, a.scenario, a.step::BIGINT AS step,
    round(a.actual_ns)::BIGINT AS actual_step_time_ns,
    round(a.replayed_ns)::BIGINT AS replayed_actual_ns,
    round(a.step_ns)::BIGINT AS step_time_ns,
    round(a.replayed_ns)::BIGINT - round(a.step_ns)::BIGINT AS gain_ns,
    CASE WHEN a.scenario = 'slowest-rank-at-median' THEN (
        SELECT array_to_string(list_sort(list(DISTINCT rank)), ',') FROM _whatif_inputs AS f
        WHERE f.job = a.job AND f.fixed AND f.scenario = 'actual' AND f.is_end
    ) END AS fixed_ranks
FROM wi_all AS a;
