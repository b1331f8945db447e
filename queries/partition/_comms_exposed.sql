-- _comms_exposed: whether a segment of the partition's sweep is exposed communication.
-- Why: "exposed" is one definition: the partition's `comms_exposed_ns` (tp_breakdown) and the
--   segments every per-operation exposure is measured on (_tp_comm_exposed_segments) read it here.
-- Input: the counts of GPU operations running over a segment of _tp_segments: c compute,
--   m memory (kernels and copies), o other, n communication.
-- Definition (docs/metrics.md "Partition"): communication runs and nothing else does: the
--   partition's precedence compute > memory > other > communication gives it the segment.
-- stage: live
-- requires: (nothing)
CREATE OR REPLACE MACRO _comms_exposed(c, m, o, n) AS n > 0 AND c = 0 AND m = 0 AND o = 0;
