-- _rank_time: a time point of a rank as one value ordered by rank, then time.
-- Why: a join of two interval sets on "same rank and overlapping" (rank = rank AND a.start <
--   b.end AND a.end > b.start) runs as a hash join on the rank with the overlap as a filter: every
--   pair of the rank's intervals is tried (122k starvation gaps x 356k idle gaps of one rank: 42 s).
--   Written as two inequalities between _rank_time values, with no equality, DuckDB runs it as
--   an inequality join (IEJoin, sorting both sides): 0.4 s, the same rows.
-- Input: rank INTEGER, t BIGINT ns (any value of BIGINT).
-- Definition: rank * 2^64 + (t + 2^63) as HUGEINT: the times of rank r fill [r * 2^64, (r+1) * 2^64),
--   so two intervals overlap in _rank_time exactly when they share a rank and overlap in time.
-- stage: live
-- requires: (nothing)
CREATE OR REPLACE MACRO _rank_time(rank, t) AS
    (rank::HUGEINT << 64) + (t::HUGEINT + 9223372036854775808);
