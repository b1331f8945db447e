"""The aligned multi-rank timeline: which window to show, and its compact payload for the page.

Why not one plotly trace per kernel: a real job has millions of GPU operations and plotly
repeats hover text per point. The page instead receives integer arrays plus one table of
unique names (the renderer escapes them: render/report/timeline.py), and builds the plotly
traces in the browser (see render/report/html.PAGE_JS).
The window is a few representative steps; past a budget of operations it shrinks to fewer
steps and then aggregates operations into time buckets, and says so on the page.

Times are aligned (job timeline): the rank's file time plus ranks.clock_offset_ns, the same
shift the `aligned_kernels` / `aligned_memops` views apply. Operations and their categories
come from the `gpu_ops` view, so the timeline agrees with the time partition.
"""

from __future__ import annotations

from typing import Any

import duckdb
import pandas as pd

from ..store.duck import has_relation
from ..store.query_layer import statements
from .document import StepRange, Timeline

# Operations (GPU ops + idle pieces) drawn one by one; above it, fewer steps, then buckets.
MAX_TIMELINE_OPS = 20_000
# Buckets per (rank, category) series across the window when aggregating: at most about one
# per screen pixel, fewer so that all series together stay within the budget ...
AGG_BUCKETS = 2_000
# ... but at least this many per series, however many ranks share the budget.
MIN_BUCKETS = 25
# Steps shown when the capture has enough of them.
WINDOW_STEPS = 3
ROWS = ("compute", "memory", "comms", "idle")
# Category -> row; `other` kernels share the compute row, copies the memory row (own colours):
# "memory" is memory-bound kernels and "copies" the memcpy / memset operations of category memory
# (the partition's memory_kernels_ns and copies_ns), so that memory never reads as copies.
ROW_OF = {"compute": 0, "other": 0, "memory": 1, "copies": 1, "comms": 2}
# The operations of the widest window considered, read once per report (a TEMP table)
WINDOW_TABLE = "_timeline_window_ops"

SQL = statements("report_doc/timeline")
# Each rank's clock offset, as a subquery the statements join in
OFFSETS = SQL["rank_offsets"]


def _near(con: duckdb.DuckDBPyConnection, window: tuple[int, int] | None, alias: str) -> str:
    """A condition on the rows' own (unaligned) times keeping every row that may overlap the
    aligned `window` (a superset, whatever the rank's offset): lets DuckDB skip the rest of the
    stored rows before aligning them."""
    if window is None:
        return ""
    lo, hi = con.execute(SQL.sql("offset_range", offsets=OFFSETS)).fetchone()
    lo, hi = int(lo or 0), int(hi or 0)
    return SQL.sql("near_window", alias=alias, after=int(window[0]) - hi, before=int(window[1]) - lo)


def _ops_sql(con: duckdb.DuckDBPyConnection, window: tuple[int, int] | None = None) -> str:
    """Every GPU operation with aligned times and its category (gpu_ops + the rank's offset);
    copies and memsets of category memory are the series `copies`."""
    if has_relation(con, "gpu_ops"):
        return SQL.sql("gpu_ops_aligned", offsets=OFFSETS, near=_near(con, window, "g"))
    # Fallback when gpu_ops is absent: the aligned views, categories as docs/metrics.md says.
    return SQL["aligned_ops_fallback"]


def _gaps_sql(con: duckdb.DuckDBPyConnection, window: tuple[int, int] | None = None) -> str | None:
    if not has_relation(con, "gaps"):
        return None
    return SQL.sql("idle_gaps_aligned", offsets=OFFSETS, near=_near(con, window, "g"))


def step_windows(con: duckdb.DuckDBPyConnection, steps: StepRange | None) -> pd.DataFrame:
    """Per step number: the aligned span over all ranks' step windows."""
    if not has_relation(con, "steps"):
        return pd.DataFrame(columns=["step", "a0", "a1"])
    cond = (steps or StepRange()).sql("s.step")
    return con.execute(SQL.sql("step_spans", offsets=OFFSETS, steps=cond)).df()


def _middle(wins: pd.DataFrame, k: int) -> pd.DataFrame:
    """The k step windows in the middle of the capture (each smaller k lies inside a larger one)."""
    i0 = max(0, (len(wins) - k) // 2)
    return wins.iloc[i0 : i0 + k]


def _count(con: duckdb.DuckDBPyConnection, source: str, t0: int, t1: int) -> int:
    return int(con.execute(SQL.sql("window_op_count", source=source), [t0, t1]).fetchone()[0])


def choose_window(
    con: duckdb.DuckDBPyConnection,
    source: str,
    steps: StepRange | None,
    budget: int,
    wins: pd.DataFrame | None = None,
) -> tuple[int, int, list[int], int, list[str]]:
    """A representative window: WINDOW_STEPS steps from the middle, fewer when over budget.
    `wins`: step_windows(con, steps) when the caller has read them (build has)."""
    if wins is None:
        wins = step_windows(con, steps)
    notes: list[str] = []
    if wins.empty:
        span = con.execute(SQL.sql("source_span", source=source)).fetchone()
        if span[0] is None:
            return 0, 0, [], 0, ["no GPU operations in the workspace"]
        t0, t1 = int(span[0]), int(span[1])
        notes.append("no step windows: the timeline shows the whole capture")
        return t0, t1, [], _count(con, source, t0, t1), notes
    n = len(wins)
    k = min(WINDOW_STEPS, n)
    while True:
        sel = _middle(wins, k)
        t0, t1 = int(sel["a0"].min()), int(sel["a1"].max())
        count = _count(con, source, t0, t1)
        if count <= budget or k == 1:
            break
        k -= 1
    shown = [int(s) for s in sel["step"]]
    if k < min(WINDOW_STEPS, n):
        notes.append(
            f"windowed: {min(WINDOW_STEPS, n)} steps hold more than {budget:,} operations, "
            f"so the timeline shows {k} step(s)"
        )
    return t0, t1, shown, count, notes


def _exact(con: duckdb.DuckDBPyConnection, source: str, t0: int, t1: int) -> pd.DataFrame:
    return con.execute(SQL.sql("window_ops", source=source), [t0, t0, t0, t1]).df()


def bucket_width(con: duckdb.DuckDBPyConnection, source: str, t0: int, t1: int, budget: int) -> int:
    """Bucket length (ns) that keeps the bars of all (rank, category) series within the budget."""
    series = con.execute(SQL.sql("window_series_count", source=source), [t0, t1]).fetchone()[0]
    buckets = min(AGG_BUCKETS, max(MIN_BUCKETS, budget // max(1, int(series))))
    return max(1, -(-(t1 - t0) // buckets))


def _aggregated(con: duckdb.DuckDBPyConnection, source: str, t0: int, t1: int, width: int) -> pd.DataFrame:
    """Operations merged per (rank, category, time bucket): span, count, busy time, longest name."""
    return con.execute(SQL.sql("window_op_buckets", source=source), [t0, t0, t0, t1, t0, width]).df()


def build(
    con: duckdb.DuckDBPyConnection, steps: StepRange | None = None, budget: int = MAX_TIMELINE_OPS
) -> Timeline:
    """Pick the window, fetch its operations and idle pieces, and pack them for the page."""
    wins = step_windows(con, steps)
    widest = None  # every window tried lies in the widest: its operations are read once
    if not wins.empty:
        middle = _middle(wins, min(WINDOW_STEPS, len(wins)))
        widest = (int(middle["a0"].min()), int(middle["a1"].max()))
    ops = _ops_sql(con, widest)
    gaps = _gaps_sql(con, widest)
    source = ops if gaps is None else SQL.sql("ops_and_gaps", ops=ops, gaps=gaps)
    if widest is not None:
        con.execute(SQL.sql("window_table", table=WINDOW_TABLE, source=source), list(widest))
        source = f"SELECT * FROM {WINDOW_TABLE}"
    try:
        return _build(con, source, steps, budget, gaps is None, wins)
    finally:
        con.execute(f"DROP TABLE IF EXISTS {WINDOW_TABLE}")


def _build(
    con: duckdb.DuckDBPyConnection,
    source: str,
    steps: StepRange | None,
    budget: int,
    no_gaps: bool,
    wins: pd.DataFrame,
) -> Timeline:
    """build() on `source` and its step windows `wins`: the window, then its operations exact or
    aggregated."""
    tl = Timeline()
    if no_gaps:
        tl.notes.append("the `gaps` view is not in this workspace: idle rows are empty")
    t0, t1, shown, count, notes = choose_window(con, source, steps, budget, wins)
    tl.notes += notes
    if t1 <= t0:
        tl.mode = "empty"
        return tl
    tl.window, tl.steps_shown, tl.ops_in_window = (t0, t1), shown, count
    if count > budget:
        tl.mode = "aggregated"
        width = bucket_width(con, source, t0, t1, budget)
        df = _aggregated(con, source, t0, t1, width)
        tl.notes.append(
            f"aggregated: the window holds {count:,} operations (budget {budget:,}); each bar merges the "
            f"operations of one kind on one rank that start in the same {width / 1e3:,.1f} µs bucket "
            "(hover: count, busy time, longest operation); zooming does not split bars"
        )
    else:
        df = _exact(con, source, t0, t1)
    ranks = [int(r[0]) for r in con.execute("SELECT rank FROM ranks ORDER BY rank").fetchall()]
    tl.payload = pack(df, t0, t1, ranks, tl.mode, shown)
    return tl


def pack(df: pd.DataFrame, t0: int, t1: int, ranks: list[int], mode: str, shown: list[int]) -> dict[str, Any]:
    """Columnar arrays per series (keyed by category) plus a table of unique names (shared by
    reference in JS); names and categories are the trace's text, escaped by the renderer."""
    lane_of_rank = pd.Series({r: i for i, r in enumerate(ranks)}, dtype="int64")
    codes, uniques = pd.factorize(df["name"].fillna(""), sort=False)
    names = list(uniques)
    df = df.assign(name_idx=codes)
    series: dict[str, dict[str, list]] = {}
    for cat, g in df.groupby("category", sort=False):
        row = ROW_OF.get(str(cat), len(ROWS) - 1)
        lane = g["rank"].map(lane_of_rank).fillna(0).astype("int64") * len(ROWS) + row
        series[cat] = {
            "s": g["s"].astype("int64").tolist(),
            "e": g["e"].astype("int64").tolist(),
            "lane": lane.tolist(),
            "rank": g["rank"].astype("int64").tolist(),
            "name": g["name_idx"].astype("int64").tolist(),
            # nullable integers, NULL as None (idle rows have no stream): one conversion, not
            # a pd.isna per operation
            "stream": [None if v is pd.NA else v for v in g["stream_id"].astype("Int64").tolist()],
            "n": g["n"].astype("int64").tolist(),
            "busy": g["busy"].astype("int64").tolist(),
        }
    return {
        "t0": t0,
        "t1": t1,
        "mode": mode,
        "steps": shown,
        "ranks": ranks,
        "rows": list(ROWS),
        "names": names,
        "series": series,
    }
