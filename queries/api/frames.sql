-- The statements of the API's functions on an open connection (nsight_analyze/api/frames.py).

-- name: partial_collectives
-- Collective instances with fewer participants than their communicator.
SELECT COUNT(*) AS n FROM collectives WHERE ranks >= 2 AND ranks < expected_ranks
