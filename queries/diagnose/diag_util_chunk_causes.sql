-- diag_util_chunk_causes: per rank, device and chunk of the 30-chunk utilisation grid
--   (diag_util_chunks), the GPU idle time inside the chunk by cause.
-- Why: the gpu-low-utilisation finding says which idle cause explains its windows; its windows are
--   runs of whole chunks, so summing these rows gives that mix without joining every idle piece of
--   the job against the windows at read time.
-- Columns: rank INTEGER, device_id INTEGER, idx BIGINT (chunk number), c0 BIGINT ns,
--   c1 BIGINT ns (the chunk), cause VARCHAR (gaps.cause), idle_ns HUGEINT ns (the rank's
--   whole-capture idle pieces of that cause clipped to the chunk).
-- Definition: `gaps` rows with step NULL (the whole-capture pieces) of the rank, each cut at the
--   chunk boundaries of every device's grid of that rank; chunks without idle time have no row.
-- columns: rank, device_id, idx, c0, c1, cause, idle_ns
-- stage: rank
-- result: stored
-- requires: diag_util_chunks, gaps
CREATE OR REPLACE VIEW diag_util_chunk_causes AS
WITH span AS (
    SELECT rank, device_id, min(c0) AS s0, max(c1) AS s1, max(idx) AS last,
           arg_min(c1 - c0, idx) AS len
    FROM diag_util_chunks GROUP BY rank, device_id
),
pieces AS (   -- each idle piece cut into the chunks it touches (index arithmetic, no range join)
    SELECT g.rank, sp.device_id, g.cause, g.start_ns, g.end_ns,
           unnest(range(greatest((g.start_ns - sp.s0) // sp.len, 0),
                        least((g.end_ns - 1 - sp.s0) // sp.len, sp.last) + 1)) AS idx
    FROM gaps g JOIN span sp ON sp.rank = g.rank
    WHERE g.step IS NULL AND g.end_ns > sp.s0 AND g.start_ns < sp.s1
)
SELECT p.rank, p.device_id, p.idx, c.c0, c.c1, p.cause,
       sum(least(p.end_ns, c.c1) - greatest(p.start_ns, c.c0)) AS idle_ns
FROM pieces p JOIN diag_util_chunks c
  ON c.rank = p.rank AND c.device_id IS NOT DISTINCT FROM p.device_id AND c.idx = p.idx
WHERE least(p.end_ns, c.c1) > greatest(p.start_ns, c.c0)
GROUP BY p.rank, p.device_id, p.idx, c.c0, c.c1, p.cause;
