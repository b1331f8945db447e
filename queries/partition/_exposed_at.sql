-- _exposed_at: a rank's exposed communication time before a time point.
-- Why: the exposed time of one NCCL operation (comm_kernels, _diag_comm_ops, and its wait in
--   diag_comm_exposure) is the rank's exposed time before its end minus that before its start.
-- Input: t BIGINT ns, and the last _tp_comm_exposed_segments row of the rank starting at or before
--   t (an ASOF join): its exposed_before_ns, start_ns and end_ns (NULL when there is none).
-- Definition: exposed_before_ns + least(t, end_ns) - start_ns (the segments are disjoint); 0 when
--   no segment starts at or before t.
-- stage: live
-- requires: (nothing)
CREATE OR REPLACE MACRO _exposed_at(t, exposed_before_ns, seg_start_ns, seg_end_ns) AS
    coalesce(exposed_before_ns + least(t, seg_end_ns) - seg_start_ns, 0);
