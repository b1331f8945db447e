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
--   max(comms_exposed - exposed_wait - last_transfer, 0), comms_total_ns BIGINT ns,
--   overlap_pct DOUBLE %,
--   unknown_wait_ns BIGINT ns (exposed time, outside the step's last reduction, of operations whose
--   wait could not be measured (diag_comm_exposure.wait_known: participants missing, e.g. a partial
--   job), at most recoverable_ns: an unknown part of it is waiting for the missing ranks, so
--   recoverable_ns is an upper bound that may be up to this much too high),
--   last_transfer_known BOOLEAN (FALSE when the step's last reduction's wait could not be
--   measured: last_transfer_ns then holds its whole exposed part, wait and transfer in unknown
--   shares; both are excluded, so recoverable_ns is unaffected).
-- Definition: diag_windows joined to diag_comm_exposure sums per (rank, step).
-- columns: rank, step, window_ns, comms_exposed_ns, exposed_wait_ns, last_transfer_ns, recoverable_ns, comms_total_ns, overlap_pct, unknown_wait_ns, last_transfer_known
-- stage: job
-- result: stored
-- requires: diag_comm_exposure, diag_windows
CREATE OR REPLACE VIEW diag_comm_recoverable AS
WITH e AS (
    SELECT rank, step, sum(exposed_wait_ns) AS exposed_wait_ns,
           sum(CASE WHEN is_last AND op IN ('AllReduce', 'ReduceScatter', 'Reduce')
                    THEN greatest(exposed_ns - exposed_wait_ns, 0) ELSE 0 END) AS last_transfer_ns,
           sum(CASE WHEN NOT wait_known AND NOT (is_last AND op IN ('AllReduce', 'ReduceScatter', 'Reduce'))
                    THEN exposed_ns ELSE 0 END) AS unknown_wait_ns,
           NOT bool_or(is_last AND op IN ('AllReduce', 'ReduceScatter', 'Reduce') AND NOT wait_known)
               AS last_transfer_known
    FROM diag_comm_exposure GROUP BY rank, step
)
SELECT w.rank, w.step, w.window_ns, w.comms_exposed_ns,
       CAST(coalesce(e.exposed_wait_ns, 0) AS BIGINT) AS exposed_wait_ns,
       CAST(coalesce(e.last_transfer_ns, 0) AS BIGINT) AS last_transfer_ns,
       CAST(greatest(w.comms_exposed_ns - coalesce(e.exposed_wait_ns, 0) - coalesce(e.last_transfer_ns, 0), 0)
            AS BIGINT) AS recoverable_ns,
       w.comms_total_ns, w.overlap_pct,
       -- at most the recoverable time (concurrent operations each count the exposed time they share)
       CAST(least(coalesce(e.unknown_wait_ns, 0),
                  greatest(w.comms_exposed_ns - coalesce(e.exposed_wait_ns, 0) - coalesce(e.last_transfer_ns, 0), 0))
            AS BIGINT) AS unknown_wait_ns,
       coalesce(e.last_transfer_known, TRUE) AS last_transfer_known
FROM diag_windows w LEFT JOIN e ON e.rank = w.rank AND e.step IS NOT DISTINCT FROM w.step;
