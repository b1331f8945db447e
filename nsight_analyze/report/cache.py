"""Compute each heavy view once per report.

Why: the report (and the summary, MFU and diagnose functions it calls) reads `time_partition`,
`gaps`, `steps` and the collective views many times, and DuckDB recomputes a view on every read.
A temporary table of the same name shadows the view for this connection only (temp objects are
found before the workspace's own), so every reader, library code included, sees identical rows
computed once. The tables are dropped afterwards; the workspace file is never written.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import duckdb

# Dependency order: a later view may read an earlier one (it then reads the cached copy).
CACHED_VIEWS = (
    "steps",
    "time_partition",
    "gaps",
    "collectives",
    "collective_waits",
    "imbalance",
    "merge_straggler_verdict",
    "rank_rollup",
    "alignment_quality",
    "launch_stats",
    "sync_calls",
)


@contextmanager
def cached_views(
    con: duckdb.DuckDBPyConnection, names: tuple[str, ...] = CACHED_VIEWS
) -> Iterator[list[str]]:
    """Shadow each existing view in `names` by a temp table of its rows; yield the cached names."""
    present = {
        r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT temporary").fetchall()
    }
    done: list[str] = []
    try:
        for name in names:
            if name not in present:
                continue
            try:
                con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM main.{name}")
                done.append(name)
            except duckdb.Error:
                continue  # a broken view stays a view; its section will say why it is missing
        yield done
    finally:
        for name in reversed(done):
            con.execute(f"DROP TABLE IF EXISTS temp.{name}")
