"""DuckDB connections with the SQLite reader loaded from its PyPI wheel, never downloaded."""

from __future__ import annotations

from pathlib import Path

import duckdb

from .errors import UserError


def sqlite_extension_path() -> Path:
    """The sqlite_scanner extension binary shipped by the duckdb-extension-sqlite-scanner wheel."""
    try:
        import duckdb_extension_sqlite_scanner as ext
    except ImportError as exc:  # pragma: no cover - packaging error
        raise UserError(
            "the DuckDB SQLite reader is not installed: "
            f"pip install 'duckdb-extension-sqlite-scanner=={duckdb.__version__}'"
        ) from exc
    candidates = sorted(Path(ext.__file__).parent.glob("extensions/*/sqlite_scanner.duckdb_extension"))
    if not candidates:  # pragma: no cover - packaging error
        raise UserError("the duckdb-extension-sqlite-scanner wheel holds no extension binary")
    return candidates[-1]


# Passed at connect time too: opening a file DuckDB takes for SQLite would otherwise try to
# download the reader before any SET could run.
OFFLINE_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}


def offline(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Forbid DuckDB from fetching extensions: air-gapped clusters have no network."""
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET enable_progress_bar = false")  # our own output stays readable
    return con


def load_sqlite_reader(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(f"LOAD '{sqlite_extension_path()}'")


def attach_sqlite(con: duckdb.DuckDBPyConnection, path: Path, alias: str) -> None:
    """Attach an SQLite file read-only under `alias`, through the offline reader."""
    load_sqlite_reader(con)
    escaped = str(path.resolve()).replace("'", "''")
    con.execute(f"ATTACH '{escaped}' AS {alias} (TYPE sqlite, READ_ONLY)")
