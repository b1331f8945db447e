"""The canonical tables, as the schema files declare them, and which of them a rank or a file owns.

Why one place: replacing a file deletes what it owns, the rank-local step shows each batch only
its ranks' rows, a worker hands back every table it filled, and the Parquet export lists them.
Read from the schema itself (a table with a `rank` column holds rows of a rank, one with a
`file_id` column rows of a file), a table added to the schema cannot be missed by any of them.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import duckdb

from .query_layer import statements

SQL = statements("store/schema")
SCHEMA_FILE = Path(__file__).with_name("schema.sql")
# The workspace's own bookkeeping, not trace rows.
BOOKKEEPING = ("meta", "settings", "files")
_CREATE_TABLE = re.compile(r"CREATE TABLE IF NOT EXISTS (\w+)", re.IGNORECASE)


def schema_files() -> list[Path]:
    """schema.sql first, then the format-specific schema_*.sql files (e.g. Nsight Compute)."""
    return [SCHEMA_FILE] + sorted(SCHEMA_FILE.parent.glob("schema_*.sql"))


@cache
def schema_tables() -> tuple[str, ...]:
    """Every table the schema files create, in their order (schema.sql first)."""
    names: list[str] = []
    for path in schema_files():
        names += [n for n in _CREATE_TABLE.findall(path.read_text()) if n not in names]
    return tuple(names)


def canonical_tables() -> tuple[str, ...]:
    """The tables trace rows go to (the schema's tables but its bookkeeping)."""
    return tuple(t for t in schema_tables() if t not in BOOKKEEPING)


def table_columns(con: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    """{table: its column names} for the tables (not views) of the connection's main database:
    what owns rows of a rank, a file or a job is read from here (catalog order)."""
    rows = con.execute(SQL["table_columns"]).fetchall()
    return dict(rows)


def owned_by(con: duckdb.DuckDBPyConnection, column: str) -> list[str]:
    """The canonical tables of the connection's main database that have `column` ('rank' or
    'file_id'), in schema order (a workspace made by an older version may lack a newer table)."""
    having = {name for name, cols in table_columns(con).items() if column in cols}
    return [t for t in canonical_tables() if t in having]
