"""DuckDB connections with the SQLite reader loaded from its PyPI wheel, never downloaded."""

from __future__ import annotations

import decimal
import errno
import itertools
import numbers
import os
import re
import tempfile
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

import duckdb

from ..errors import UserError
from .query_layer import statements

SQL = statements("store/duck")
T = TypeVar("T")


def path_text(path: Path) -> str:
    """A path as text a database can hold: bytes of a name that are not UTF-8 (a latin-1 name on
    a Linux filesystem, which Python holds as lone surrogates and DuckDB refuses) as `\\xff`."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def utf8_path(path: Path) -> bool:
    """Whether DuckDB can open `path` by name (its readers take UTF-8 text, not bytes)."""
    return path_text(path) == str(path)


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


# Every connection `offline` set up, while it lives: what a Ctrl-C interrupts (interrupt_all)
_OPEN: weakref.WeakSet[duckdb.DuckDBPyConnection] = weakref.WeakSet()


def interrupt_all() -> None:
    """Interrupt the query of every open connection (cli: a Ctrl-C). A closed or idle one
    ignores it; the command exits on the KeyboardInterrupt that follows."""
    for con in list(_OPEN):
        with suppress(Exception):
            con.interrupt()


def offline(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Forbid DuckDB from fetching extensions: air-gapped clusters have no network. (Every
    connection of ours comes through here: it is also where a Ctrl-C finds them, `_OPEN`.)"""
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET enable_progress_bar = false")  # our own output stays readable
    # An ASOF join whose probe side DuckDB estimates at <= 64 rows runs as a nested loop over
    # the whole build side. The rank-local queries read filtered (shadowed) tables whose
    # estimates are that small while holding thousands of rows: nvtx_gpu_projection took about 3 s
    # instead of 0.1 s on a 2.5 MB two-rank capture (2 idle cores); on none of the shared captures
    # was the sort-merge ASOF slower.
    con.execute("SET asof_loop_join_threshold = 0")
    _OPEN.add(con)
    return con


def load_sqlite_reader(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(f"LOAD '{sqlite_extension_path()}'")


def attach_sqlite(con: duckdb.DuckDBPyConnection, path: Path, alias: str) -> None:
    """Attach an SQLite file read-only under `alias`, through the offline reader."""
    load_sqlite_reader(con)
    escaped = str(path.resolve()).replace("'", "''")
    con.execute(f"ATTACH '{escaped}' AS {alias} (TYPE sqlite, READ_ONLY)")


MEMORY_ENV = "NSIGHT_ANALYZE_MEMORY_LIMIT"
MEMORY_PER_THREAD = 1 << 30  # DuckDB's guidance for joins and windows: 1-4 GB per thread
_spill_dirs = itertools.count()


def on_own_cursor(con: duckdb.DuckDBPyConnection, fn: Callable[..., T], *args: Any) -> T:
    """`fn(cursor, *args)` on a cursor of `con` of its own, closed after: a connection runs one
    query at a time, so work handed to another thread (diagnose beside compare's or the
    report's reads) gets its own."""
    cursor = con.cursor()
    try:
        return fn(cursor, *args)
    finally:
        cursor.close()


_MEMORY_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(?:[KMGT](?:i?B)?|B)", re.IGNORECASE)  # DuckDB's units


def analysis_memory_limit(threads: int) -> str:
    """$NSIGHT_ANALYZE_MEMORY_LIMIT, else 1 GiB per DuckDB thread, at most half the machine's memory.

    Why not DuckDB's default (80% of RAM): the partition of thousands of ranks would take what
    it finds on a shared login node, and a few GB more buy little; past the limit DuckDB spills.
    """
    configured = os.environ.get(MEMORY_ENV, "").strip()
    if configured:
        size = _MEMORY_SIZE.fullmatch(configured)
        if not size or not float(size.group(1)):
            # DuckDB takes "-1GB" for no limit at all and "1e3GB" for 1 byte (then runs out of
            # memory, and the message says the cap was "1e3GB")
            raise UserError(
                f"{MEMORY_ENV}={configured!r} is not a memory size: give a positive number and a unit, "
                "e.g. 8GB or 512MiB"
            )
        return configured
    limit = max(1, threads) * MEMORY_PER_THREAD
    try:
        limit = min(limit, os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2)
    except (AttributeError, ValueError, OSError):  # not POSIX: no cap
        pass
    return f"{max(limit, 256 << 20) >> 20}MiB"


def main_schema(con: duckdb.DuckDBPyConnection) -> str:
    """The workspace's own schema, qualified by catalog (`main.x` alone may name a TEMP object)."""
    db = con.execute("SELECT current_database()").fetchone()[0]
    return '"' + db.replace('"', '""') + '".main'


def sql_string(text: str) -> str:
    """`text` as a SQL string literal (quotes doubled; DuckDB reads no backslash escapes in one).

    Why not a bound parameter: binding any Python value (even an int) makes DuckDB (1.4+) import
    pandas and numpy first (its import cache, to recognise their types): 0.3-0.5 s that `summary`,
    the workspace opening every command does and an ingest would otherwise pay. A NUL, which a
    literal cannot hold, is spliced in as chr(0)."""
    return " || chr(0) || ".join("'" + part.replace("'", "''") + "'" for part in text.split("\x00"))


def sql_value(value: Any) -> str:
    """A Python value as a SQL literal: None, bool, a number, str, or a list/tuple of them (a
    LIST literal; cast it to the element type where the list may be empty). See sql_string."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, numbers.Integral):  # numpy's integers too
        return str(int(value))
    if isinstance(
        value, numbers.Real
    ):  # through text: DuckDB's parser rounds correctly, a DECIMAL cast may not
        return f"CAST('{float(value)!r}' AS DOUBLE)"
    if isinstance(value, decimal.Decimal) and value.is_finite():
        return format(value, "f")  # a DECIMAL (or integer) literal, exact
    if isinstance(value, str):
        return sql_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(sql_value(v) for v in value) + "]"
    raise TypeError(f"no SQL literal for {type(value).__name__}")


def sql_row(values: tuple | list) -> str:
    """Values as the comma-separated literals of one row (inside an `INSERT ... VALUES (...)`)."""
    return ", ".join(sql_value(v) for v in values)


def sql_rows(rows: list[tuple] | list[list]) -> str:
    """Rows as the body of an `INSERT ... VALUES` (an executemany without bound parameters)."""
    return ", ".join(f"({sql_row(row)})" for row in rows)


def fetch_records(con: duckdb.DuckDBPyConnection, sql: str, missing: str) -> list[dict[str, Any]]:
    """The rows of one statement as dicts of plain Python values (none for a statement without a
    result), read with `fetchall`: no DataFrame, so a command that reads them imports no pandas.
    A missing table or view (a workspace computed by an older release, or never analysed) is
    the UserError `missing`, with `{missing}` replaced by DuckDB's first line."""
    try:
        cur = con.execute(sql)
    except duckdb.CatalogException as exc:
        raise UserError(missing.replace("{missing}", str(exc).splitlines()[0])) from None
    if cur.description is None:
        return []
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


# the types `.df()` turns into floats (sums of integers are HUGEINT; `100.0 * x` is DECIMAL)
AS_FLOAT_TYPE = re.compile(r"^(U?HUGEINT|DECIMAL\(\d+,\d+\))(\[\])*$")


def plain_rows(
    con: duckdb.DuckDBPyConnection, sql: str, limit: int | None = None
) -> tuple[list[str], list[tuple], duckdb.DuckDBPyConnection]:
    """(columns, rows, the cursor) of one query: its first `limit` rows (None: all) as plain Python
    values, NULL as None and HUGEINT and DECIMAL values (in lists too) as floats, as `.df()` makes
    them, so code that read a DataFrame computes and prints the same numbers from them. Why not
    a DataFrame: importing pandas costs half a second of a command that only reads a few rows.
    The cursor reads the rest."""
    cur = con.execute(sql)
    described = cur.description or []
    rows = cur.fetchall() if limit is None else cur.fetchmany(limit) if limit > 0 else []
    return [str(d[0]) for d in described], floated(described, rows), cur


def plain_records(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    """The rows of `sql` as dicts of `plain_rows` values."""
    names, rows, _ = plain_rows(con, sql)
    return [dict(zip(names, r, strict=True)) for r in rows]


def floated(described: list[tuple], rows: list[tuple]) -> list[tuple]:
    """`rows` (of a cursor with this `description`) with HUGEINT and DECIMAL values as floats."""
    floats = {i for i, d in enumerate(described) if AS_FLOAT_TYPE.match(str(d[1]))}
    if not floats or not rows:
        return rows
    return [tuple(_floated(v) if i in floats else v for i, v in enumerate(r)) for r in rows]


def _floated(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, list):
        return [_floated(v) for v in value]
    return float(value)


def has_relation(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether this connection sees a table or view `name` (TEMP ones included): a stored result
    is missing in a workspace that was never analysed."""
    row = con.execute(SQL.sql("relation_count", name=sql_string(name))).fetchone()
    return bool(row and row[0])


def bound_memory(con: duckdb.DuckDBPyConnection) -> None:
    """Cap the connection's memory (analysis_memory_limit) and let it spill to a private folder.

    The spill folder is under the system temporary directory, not beside the workspace, which
    may be read-only; DuckDB creates it only when it spills and removes it when it closes.
    """
    threads = int(con.execute("SELECT current_setting('threads')").fetchone()[0])
    limit = analysis_memory_limit(threads)
    try:
        con.execute("SET memory_limit = '" + limit.replace("'", "''") + "'")
    except duckdb.Error:  # a size our pattern takes and DuckDB does not
        raise UserError(f"{MEMORY_ENV}={limit!r} is not a memory size DuckDB accepts (e.g. 8GB)") from None
    spill = Path(tempfile.gettempdir()) / f"nsight_analyze_spill_{os.getpid()}_{next(_spill_dirs)}"
    try:
        con.execute("SET temp_directory = '" + str(spill).replace("'", "''") + "'")
    except duckdb.NotImplementedException:
        pass  # it has spilled already (an ingest landing a large batch): it keeps that folder


HELD_CHECKPOINT_THRESHOLD = "1GiB"  # write-ahead log between checkpoints while held


@contextmanager
def checkpoints_held(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """Hold DuckDB's automatic checkpoints back while the block runs (the database's setting, so
    every cursor's) to one per HELD_CHECKPOINT_THRESHOLD of log; the first commit after the block,
    or the close, checkpoints the rest.

    Why: DuckDB checkpoints at a commit once its write-ahead log passes `checkpoint_threshold`
    (16 MiB). The analysis appends every rank batch's results to some 60 staged tables, and each
    checkpoint rewrites their partly filled row groups: about 0.3 s each, one every batch or two.
    At 64 ranks x 200k kernels a recompute in batches of one rank spent 20 s of its 75 s on
    them; one checkpoint at the end took 1.7 s. Held at 1 GiB of log, not forever: the log is a
    second, uncompressed copy on disk, and a job of thousands of ranks would grow it without end.
    A kill meanwhile loses nothing committed: the log is replayed when the workspace next opens.
    """
    before = con.execute("SELECT current_setting('checkpoint_threshold')").fetchone()[0]
    restore = f"SET checkpoint_threshold = {sql_string(before)}"
    con.execute(f"SET checkpoint_threshold = '{HELD_CHECKPOINT_THRESHOLD}'")
    try:
        yield
    except BaseException:
        with suppress(duckdb.Error):  # the block's own error is the one to see
            con.execute(restore)
        raise
    con.execute(restore)


def rollback(con: duckdb.DuckDBPyConnection) -> None:
    """End the open transaction; none left is fine. Why: a COMMIT that fails to write (a full
    disk) has already rolled back, and a second ROLLBACK raised "no transaction is active",
    which hid the reason."""
    with suppress(duckdb.TransactionException):
        con.execute("ROLLBACK")


# A write that found no room: the disk full, a quota or the process's file size limit reached
NO_ROOM = {
    errno.ENOSPC: "No space left on device",
    errno.EDQUOT: "Disk quota exceeded",
    errno.EFBIG: "File too large",
}


def no_room(exc: BaseException | str) -> bool:
    """Whether `exc` (or an error's text) is a write that found no room (DuckDB's or an OSError)."""
    if getattr(exc, "errno", None) in NO_ROOM:
        return True
    return any(text in str(exc) for text in NO_ROOM.values())


def no_room_error(exc: BaseException | str) -> UserError:
    """The one line for such a write, saying what to do."""
    first = str(exc).splitlines()[0] if str(exc) else "no room to write"
    return UserError(
        f"cannot write ({first}): the disk is full, or a quota or file size limit is reached; "
        "free space or write to another disk, then run the command again"
    )


def out_of_memory(what: str) -> UserError:
    """The one line for a query that exceeded the memory cap, saying how to raise it."""
    limit = os.environ.get(MEMORY_ENV, "").strip() or "the default cap"
    return UserError(
        f"{what} ran out of memory under {limit}: set {MEMORY_ENV} higher (e.g. {MEMORY_ENV}=8GB) "
        "or free memory, then run the command again"
    )
