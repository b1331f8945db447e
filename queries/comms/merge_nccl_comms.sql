-- merge_nccl_comms: the NCCL communicators each rank joined, with its rank in each and their size.
-- Why: a point-to-point call names its peer as a rank of its communicator (NCCL's "Peer rank"),
-- and a communicator's size says whether all participants of a collective on it are present;
-- both come only from NCCL's own NVTX payload of ncclCommInitRank (and its siblings
-- ncclCommInitRankConfig/Scalable, ncclCommSplit, ...: NCCL >= 2.19, nsys --include-json),
-- which names the communicator, the caller's rank in it and the number of ranks; with the
-- advanced NCCL trace (nsys 2025.6.1+), from its `CommInit` markers (keys commHash, rank, nRanks).
-- Columns:
--   rank INTEGER, comm VARCHAR (communicator id, as in merge_nccl_kernels.comm),
--   comm_rank INTEGER (the rank's number in the communicator), comm_size INTEGER (ranks in it)
-- columns: rank, comm, comm_rank, comm_size
-- stage: rank
-- result: stored
-- requires: nvtx
CREATE OR REPLACE VIEW merge_nccl_comms AS
WITH inits AS (
    SELECT
        rank,
        NULLIF(regexp_extract(payload, '(?i)"[^"]*comm[^"]*"\s*:\s*"?([0-9A-Za-z_]+)', 1), '') AS comm,
        TRY_CAST(NULLIF(regexp_extract(payload, '"(?:Rank|rank)"\s*:\s*"?([0-9]+)', 1), '') AS INTEGER)
            AS comm_rank,
        TRY_CAST(NULLIF(regexp_extract(payload, '(?i)"(?:No\. of ranks|nRanks)"\s*:\s*"?([0-9]+)', 1), '')
            AS INTEGER) AS comm_size
    FROM nvtx
    WHERE payload IS NOT NULL AND (starts_with(text, 'ncclComm') OR text = 'CommInit')
)
SELECT rank, comm, MIN(comm_rank)::INTEGER AS comm_rank, MAX(comm_size)::INTEGER AS comm_size
FROM inits
WHERE comm IS NOT NULL AND comm_rank IS NOT NULL
GROUP BY rank, comm;
