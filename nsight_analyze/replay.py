"""The what-if replay's recurrence, as the DuckDB function `_whatif_replay` that queries/whatif.sql calls.

Why a function and not SQL: the replay is sequential (a collective ends when its last participant
arrives, and each rank's next arrival depends on that end), so SQL needs a recursive CTE, and
DuckDB's recursive CTE rescans its whole input at every iteration: events² × ranks work (docs/whatif.md
has the measurement). Here it is one pass over the events, each a few array operations over the
ranks. Everything the recurrence reads (offsets,
queue gaps, transfers, tails) is computed by the SQL; this only runs the recurrence of
docs/whatif.md ("Replay"):

    collective j, participant r: arrival_r = max(anchor_r + off_r, previous end_r + fifo_r)
                                 end_r = max over participants of arrival + x_r
                                 (end_r becomes the anchor when the rank's work waited for it)
    step end, every rank:        end_r = max(previous end_r, anchor_r + off_r) + post_r;
                                 the step's time is max over ranks of end_r - its start,
                                 and the next step starts (and anchors) at end_r.
"""

from __future__ import annotations

from typing import Any

import duckdb

NAME = "_whatif_replay"
EVENT = "STRUCT(is_end BOOLEAN, part BOOLEAN, waits BOOLEAN, off BIGINT, fifo BIGINT, x BIGINT, post BIGINT)"
_NONE = -(2**62)  # "no value" (SQL NULL): below every time, and adding a duration cannot overflow


def register(con: duckdb.DuckDBPyConnection) -> None:
    """Make `_whatif_replay(start_ns BIGINT[], events EVENT[]) -> BIGINT[]` callable on `con`."""
    try:
        con.create_function(NAME, _replay_rows, ["BIGINT[]", f"{EVENT}[]"], "BIGINT[]", type="arrow")
    except duckdb.NotImplementedException as exc:  # registered on this connection already
        if "already created" not in str(exc):
            raise


def _replay_rows(starts: Any, events: Any) -> Any:
    """One replay per row: a job and scenario (the arrow UDF gets a batch of rows)."""
    import pyarrow as pa

    out = [_replay(starts[i].values, events[i].values) for i in range(len(starts))]
    return pa.array(out, type=pa.list_(pa.int64()))


def _column(events: Any, name: str, fill: Any) -> Any:
    import pyarrow.compute as pc

    return pc.fill_null(events.field(name), fill).to_numpy(zero_copy_only=False)


def _replay(starts: Any, events: Any) -> list[int | None]:
    """The step times (ns, in event order of the step ends) of one job and scenario.

    `starts`: each rank's start of the first step (aligned clock), in rank order; `events`: for
    every event in order, one entry per rank in the same order (the SQL's wi_inp rows).
    """
    import numpy as np

    start = starts.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    n = len(start)
    if n == 0 or len(events) % n:
        raise ValueError(f"{NAME}: {len(events)} event entries are not a whole number of events × {n} ranks")
    shape = (len(events) // n, n)
    is_end = _column(events, "is_end", False).reshape(shape)[:, 0]
    part = _column(events, "part", False).reshape(shape)
    waits = _column(events, "waits", False).reshape(shape) & part
    off = _column(events, "off", _NONE).reshape(shape)
    fifo = _column(events, "fifo", 0).reshape(shape)
    x = _column(events, "x", 0).reshape(shape)
    post = _column(events, "post", 0).reshape(shape)
    nothing = np.full(n, _NONE, dtype=np.int64)
    anchor, step_start, last = start, start, nothing
    times: list[int | None] = []
    for k in range(shape[0]):
        if is_end[k]:
            end = np.maximum(last, anchor + off[k]) + post[k]
            valid = (end > _NONE // 2) & (step_start > _NONE // 2)  # SQL's max skips NULLs
            times.append(int((end - step_start)[valid].max()) if valid.any() else None)
            anchor = step_start = end
            last = nothing
            continue
        p = part[k]
        if not p.any():
            continue
        arrival = np.maximum(anchor + off[k], last + fifo[k])
        end = arrival[p].max() + x[k]
        last = np.where(p, end, last)
        anchor = np.where(waits[k], end, anchor)
    return times
