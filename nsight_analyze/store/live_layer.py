"""What every connection the queries run on holds besides the stored results: the canonical tables,
the live views and macros of queries/, and the settings as session variables.

Why a module of its own: the workspace file holds them, and so does a worker's private in-memory
database (rank_task), which never knows the workspace; and `analysis` sets the settings on the
connections it computes on. Below `analysis`, `workspace` and `rank_task`, it imports none of
them: whoever calls `ensure_layer` passes the layer's hash (`analysis.layer_hash`).
"""

from __future__ import annotations

import duckdb

from ..errors import UserError
from . import query_layer
from .duck import no_room, sql_string
from .query_layer import statements
from .schema import schema_files

SQL = statements("store/live_layer")

# Views of earlier versions whose names are now private helpers or stored tables.
LEGACY_VIEWS = (
    "tp_nvtx_step_ranges", "tp_detected_steps", "tp_segments", "tp_gap_spans", "tp_sync_api", "tp_gaps",
    "merge_nccl_payload", "merge_coll_arrivals",
)  # fmt: skip


def load_live_queries(con: duckdb.DuckDBPyConnection, temporary: bool = False) -> None:
    """Create the live views and macros of queries/ (the stored results are `analysis`'s job).

    A query that fails to load fails the command: a half-loaded layer would answer wrongly.
    """
    for q in query_layer.of_stage("live"):
        try:
            con.execute(q.create("view", temporary=temporary))
        except duckdb.Error as exc:
            if no_room(exc):  # the workspace's disk, not the query
                raise
            raise UserError(f"{q.path} does not load: {str(exc).splitlines()[0]}") from None


def drop_stale_objects(con: duckdb.DuckDBPyConnection) -> None:
    """Objects an older version left under a name whose kind changed: views where results are
    now stored tables (or private helpers), stored tables where a query is now a live view."""
    layer = query_layer.layer()
    not_views = set(LEGACY_VIEWS) | {q.name for q in layer if q.stage != "live"}
    not_tables = {q.name for q in layer if q.stage == "live"}
    for (name,) in con.execute(SQL["stored_views"]).fetchall():
        if name in not_views:
            con.execute(f'DROP VIEW "{name}"')
    for (name,) in con.execute(SQL["stored_tables"]).fetchall():
        if name in not_tables:
            con.execute(f'DROP TABLE "{name}"')


def ensure_layer(con: duckdb.DuckDBPyConnection, layer_hash: str, schema_version: str) -> None:
    """The canonical tables (created if missing) and, when the `queries_hash` in `meta` is not
    `layer_hash`, the live views of this layer (what an older one left under a changed kind
    dropped first), with the hash and `schema_version` stored in `meta`."""
    for path in schema_files():
        con.execute(path.read_text())
    stored = con.execute("SELECT value FROM meta WHERE key = 'queries_hash'").fetchone()
    if stored is None or stored[0] != layer_hash:
        drop_stale_objects(con)
        load_live_queries(con)
        con.execute(
            SQL.sql(
                "stamp_layer", layer_hash=sql_string(layer_hash), schema_version=sql_string(schema_version)
            )
        )


def settings_as_variables(con: duckdb.DuckDBPyConnection) -> None:
    """Expose `settings` as session variables: the queries then compile each regex once
    instead of once per row (they still fall back to the table in a plain duckdb shell)."""
    try:
        rows = con.execute("SELECT key, value FROM settings").fetchall()
    except duckdb.CatalogException:  # a workspace older than the settings table
        return
    for key, value in rows:
        if key.replace("_", "").isalnum():
            if value is None or "\x00" in value:
                con.execute(f"SET VARIABLE {key} = ?", [value])
            else:  # a literal: a bound parameter imports pandas (duck.sql_string)
                con.execute(f"SET VARIABLE {key} = {sql_string(value)}")
