-- diag_comm_recoverable: per rank and step, exposed communication that better overlap could hide.
-- Why: exposed comms is an upper bound on what overlap can save; two parts of it are not an
-- overlap problem: waiting for the last rank to arrive (load imbalance, charged to the straggler
-- finding; only complete instances have a wait, see diag_comm_exposure) and the last gradient
-- reduction's own transfer (its gradients are ready only when backward ends, so nothing is left
-- to overlap it with). The second applies only when the step's last comms operation is a
-- reduction (AllReduce, ReduceScatter, Reduce): a point-to-point or all-to-all transfer (SendRecv)
-- or a gather is not gradient synchronisation and can be overlapped like any other.
-- Columns: rank INTEGER, step BIGINT (NULL = whole capture), window_ns BIGINT ns,
--   comms_exposed_ns BIGINT ns (time_partition), exposed_wait_ns BIGINT ns (exposed time spent
--   waiting for the last arrival), last_transfer_ns BIGINT ns (exposed, non-waiting part of the
--   step's last comms operation when it is a reduction, else 0), recoverable_ns BIGINT ns =
--   max(comms_exposed - exposed_wait - last_transfer, 0), comms_total_ns BIGINT ns, overlap_pct DOUBLE %.
-- Definition: diag_windows joined to diag_comm_exposure sums per (rank, step).
-- columns: rank, step, window_ns, comms_exposed_ns, exposed_wait_ns, last_transfer_ns, recoverable_ns, comms_total_ns, overlap_pct
-- stage: job
-- result: stored
-- requires: diag_comm_exposure, diag_windows
CREATE OR REPLACE VIEW diag_comm_recoverable AS
WITH e AS (
    SELECT rank, step, sum(exposed_wait_ns) AS exposed_wait_ns,
           sum(CASE WHEN is_last AND op IN ('AllReduce', 'ReduceScatter', 'Reduce')
                    THEN greatest(exposed_ns - exposed_wait_ns, 0) ELSE 0 END) AS last_transfer_ns
    FROM diag_comm_exposure GROUP BY rank, step
)
SELECT w.rank, w.step, w.window_ns, w.comms_exposed_ns,
       CAST(coalesce(e.exposed_wait_ns, 0) AS BIGINT) AS exposed_wait_ns,
       CAST(coalesce(e.last_transfer_ns, 0) AS BIGINT) AS last_transfer_ns,
       CAST(greatest(w.comms_exposed_ns - coalesce(e.exposed_wait_ns, 0) - coalesce(e.last_transfer_ns, 0), 0)
            AS BIGINT) AS recoverable_ns,
       w.comms_total_ns, w.overlap_pct
FROM diag_windows w LEFT JOIN e ON e.rank = w.rank AND e.step IS NOT DISTINCT FROM w.step;
