"""The what-if replay's recurrence, run between two queries: `_whatif_inputs` in, `_whatif_replayed` out.

Why here and not in SQL: the replay is sequential (a collective ends when its last participant
arrives, and each rank's next arrival depends on that end), so SQL needs a recursive CTE, and
DuckDB's recursive CTE rescans its whole input at every iteration: events² × ranks work (docs/whatif.md
has the measurement). Here it is one pass over the events, each a few array operations over the
ranks. Why between two queries and not a DuckDB Python function: DuckDB imports pandas and
pyarrow to call any Python function (0.2-0.3 s and 100 MB of the sample job's 3 s ingest, which
needs neither); the inputs are read with `fetchnumpy` and the few step times written back as
literals. Everything the recurrence reads (offsets, queue gaps, transfers, tails) is computed by
queries/whatif/_whatif_inputs.sql; this only runs the recurrence of docs/whatif.md ("Replay"):

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

from .store.duck import sql_rows, sql_string
from .store.query_layer import statements

SQL = statements("answers/replay")

READER = "whatif"  # the query that reads the replayed table: the job step computes it just before
INPUTS = "_whatif_inputs"
TABLE = "_whatif_replayed"
_NONE = -(2**62)  # "no value" (SQL NULL): below every time, and adding a duration cannot overflow
_FILL = {"is_end": False, "part": False, "waits": False, "off": _NONE, "fifo": 0, "x": 0, "post": 0, "w0": 0}


def compute(con: duckdb.DuckDBPyConnection) -> str:
    """Replay every job and scenario of `_whatif_inputs` into the TEMP table `_whatif_replayed`
    (job INTEGER, scenario VARCHAR, step BIGINT, step_ns BIGINT: NULL where no rank has the step's
    start); returns its name. One job and scenario is read at a time: the inputs of all of them
    are events × ranks × 6 rows (12 million at 1024 ranks and the default event budget)."""
    rows: list[tuple[Any, ...]] = []
    groups = con.execute(SQL.sql("replay_groups", inputs=INPUTS)).fetchall()
    for job, scenario, count, ranks in groups:
        if count % ranks:  # _whatif_inputs has every rank of the job at every event
            raise ValueError(
                f"{INPUTS}: {count} rows of job {job}, {scenario} are not events × {ranks} ranks"
            )
        events = SQL.sql(
            "replay_events",
            columns=", ".join(_FILL),
            inputs=INPUTS,
            job=int(job),
            scenario=sql_string(scenario),
        )
        cols = con.execute(events).fetchnumpy()
        ev = {k: _filled(cols[k], fill).reshape(-1, ranks) for k, fill in _FILL.items()}
        steps = _filled(cols["step"], -1).reshape(-1, ranks)[ev["is_end"][:, 0], 0]
        rows += [(job, scenario, int(s), t) for s, t in zip(steps, _replay(ev), strict=True)]
    con.execute(SQL.sql("create_replayed", table=TABLE))
    if rows:
        con.execute(SQL.sql("insert_replayed", table=TABLE, rows=sql_rows(rows)))
    return TABLE


def _filled(column: Any, fill: Any) -> Any:
    """A fetched column as a plain array, NULLs (a masked array's masked entries) as `fill`."""
    import numpy as np

    return np.ma.filled(column, fill).astype(type(fill) if isinstance(fill, bool) else np.int64)


def _replay(ev: dict[str, Any]) -> list[int | None]:
    """The step times (ns, in event order of the step ends) of one job and scenario.

    `ev`: each input column as an (events × ranks) array, ranks in rank order; `w0` holds each
    rank's start of the first step (aligned clock) on every row.
    """
    import numpy as np

    start = ev["w0"][0]
    n = len(start)
    is_end = ev["is_end"][:, 0]
    part, off, fifo, x, post = ev["part"], ev["off"], ev["fifo"], ev["x"], ev["post"]
    waits = ev["waits"] & part
    nothing = np.full(n, _NONE, dtype=np.int64)
    anchor, step_start, last = start, start, nothing
    times: list[int | None] = []
    for k in range(len(is_end)):
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
