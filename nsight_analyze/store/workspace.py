"""Open or create a DuckDB workspace: canonical tables, then the views of queries/.

The views live in the workspace file itself so that the plain `duckdb` CLI sees them
too. They are recreated whenever the package's query files change (hash in `meta`).
A new workspace is a copy of an empty one built once per machine (`_template`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
from pathlib import Path

import duckdb

from .. import analysis
from ..errors import UserError, WorkspaceBusy
from ..sources.nsys_meta import SQLITE_MAGIC
from .duck import OFFLINE_CONFIG, bound_memory, offline, path_text, utf8_path
from .live_layer import ensure_layer, load_live_queries, settings_as_variables
from .query_layer import queries_dir, query_files  # noqa: F401 - re-exported for callers
from .schema import schema_files  # noqa: F401 - re-exported for callers

SCHEMA_VERSION = analysis.SCHEMA_VERSION  # one version: the stamps and the workspace's meta


def queries_hash() -> str:
    """The schema and queries/ files: the workspace's live views are recreated when it changes."""
    from ..analysis import layer_hash

    return layer_hash()


def is_workspace(path: Path) -> bool:
    """A DuckDB database file (magic 'DUCK' at byte 8, after 8 bytes of checksum), not a trace."""
    if not path.is_file():
        return False
    with path.open("rb") as fh:
        return fh.read(12)[8:12] == b"DUCK"


def _refuse_other_files(path: Path) -> None:
    """A file that exists but is not a DuckDB database is refused before DuckDB opens it. Why:
    DuckDB opens an existing Parquet, CSV or JSON file (a Kineto trace included) as an in-memory
    database with a view of it, so `ingest --db rank0.pt.trace.json` said "8 file(s) ingested"
    and kept nothing, and a reading command failed with "Cannot launch in-memory database in
    read-only mode". An empty file is not a database either (DuckDB refuses it with its own
    message)."""
    if path.is_dir():
        raise UserError(
            f"{path} is a folder, not a workspace: --db (or $NSIGHT_ANALYZE_DB) names a file, "
            f"e.g. {path / 'nsight_analyze.duckdb'}"
        )
    if not path.is_file() or is_workspace(path):
        return
    with open(path, "rb") as fh:
        if fh.read(16) == SQLITE_MAGIC:
            raise UserError(f"{path} is an SQLite file, not a workspace: ingest it first")
        raise UserError(
            f"{path} is not a workspace (not a DuckDB database file; a trace? ingest it): "
            "--db names the workspace, an existing one or a new file name"
        )


BUSY_WAIT_ENV = "NSIGHT_ANALYZE_BUSY_WAIT"  # seconds a command waits for another one's lock
BUSY_WAIT_S = 60.0  # for a reader (another process is writing: computing what it reads, likely)
WRITER_WAIT_S = 5.0  # for a writer (others read): then it computes into its own session


def _busy_wait(read_only: bool) -> float:
    """Seconds to wait for a lock: $NSIGHT_ANALYZE_BUSY_WAIT, else BUSY_WAIT_S; a writer waits at
    most WRITER_WAIT_S (it can compute into its own session instead)."""
    given = os.environ.get(BUSY_WAIT_ENV, "").strip()
    try:
        wait = float(given) if given else BUSY_WAIT_S
    except ValueError:
        wait = -1.0
    if not wait >= 0:  # also NaN
        raise UserError(f"{BUSY_WAIT_ENV}={given!r} is not a number of seconds (e.g. 60; 0: do not wait)")
    return wait if read_only else min(wait, WRITER_WAIT_S)


def _connect(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    """A connection to the workspace file; while another process holds a lock that keeps it out,
    waits (one line on stderr) up to _busy_wait seconds, then raises WorkspaceBusy."""
    limit = _busy_wait(read_only)
    deadline = time.monotonic() + limit
    said = False
    while True:
        try:
            return _connect_once(path, read_only)
        except WorkspaceBusy:
            if time.monotonic() >= deadline:
                raise
            if not said:
                _say(
                    f"workspace {path_text(path)} is busy (another process has it open): "
                    f"waiting up to {limit:.0f} s"
                )
                said = True
            time.sleep(0.2)


def _connect_once(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    if not utf8_path(path.absolute()):  # DuckDB takes a name as UTF-8 text: it raised UnicodeEncodeError
        raise UserError(
            f"workspace {path_text(path)}: its path is not valid UTF-8, which DuckDB cannot open: "
            "give --db a UTF-8 name"
        )
    _refuse_other_files(path)
    try:
        con = offline(duckdb.connect(str(path), read_only=read_only, config=OFFLINE_CONFIG))
    except duckdb.IOException as exc:
        text = str(exc)
        if "lock" in text.lower():
            raise WorkspaceBusy(
                f"workspace {path} is busy: another nsight-analyze (or duckdb) process is writing it; "
                "retry when it has finished"
            ) from None
        raise UserError(f"cannot open workspace {path}: {text.splitlines()[0]}") from None
    except duckdb.Error as exc:
        raise UserError(f"{path} is not a usable DuckDB workspace: {str(exc).splitlines()[0]}") from None
    try:
        bound_memory(con)
    except UserError:
        con.close()
        raise
    return con


def _ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    """The canonical tables and this layer's live views, the hash stored (live_layer.ensure_layer)."""
    ensure_layer(con, queries_hash(), SCHEMA_VERSION)


CACHE_ENV = "NSIGHT_ANALYZE_CACHE_DIR"


def cache_dir() -> Path | None:
    """Where the empty-workspace template lives: $NSIGHT_ANALYZE_CACHE_DIR, else the user's cache
    (None without a home folder: HOME=/nonexistent, the convention of service accounts, was
    created, folder by folder, to hold the template)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "nsight-analyze"
    try:
        home = Path.home()
    except RuntimeError:  # no HOME and no password entry (some batch systems)
        return None
    return home / ".cache" / "nsight-analyze" if home.is_dir() else None


def _template() -> Path | None:
    """An empty workspace of this schema, queries and DuckDB version; built on first use.

    Why: creating the schema and the live views binds some 130 statements, 0.15-0.2 s of every
    new workspace (2 cores), against milliseconds to copy a file. None when the cache cannot
    be written: the caller then creates the workspace itself.
    """
    folder = cache_dir()
    if folder is None:
        return None
    path = folder / f"workspace-{duckdb.__version__}-{queries_hash()[:16]}.duckdb"
    if path.is_file():
        return path
    tmp = folder / f".{path.name}.{os.getpid()}.tmp"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        con = _connect(tmp, read_only=False)
        try:
            _ensure_schema(con)
        finally:
            con.close()
        if Path(f"{tmp}.wal").exists():  # not checkpointed at close: not one self-contained file
            return None
        os.replace(tmp, path)
    except (OSError, UserError):
        return None
    finally:
        for leftover in (tmp, Path(f"{tmp}.wal")):
            with contextlib.suppress(OSError):
                leftover.unlink(missing_ok=True)
    for old in folder.glob("workspace-*.duckdb"):  # other versions' (one template per machine)
        if old != path:
            with contextlib.suppress(OSError):
                old.unlink()
    return path


def _create_from_template(path: Path) -> Path | None:
    """Create the workspace `path` as a copy of the template (atomically: a temporary name, then
    a rename) and return the template; None when there is none or the copy fails (DuckDB then
    creates the file)."""
    template = _template()
    if template is None:
        return None
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        shutil.copyfile(template, tmp)
        os.replace(tmp, path)
    except OSError:  # the template went (another version replaced it) or the folder is not ours
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        return None
    return template


def _connect_new(path: Path) -> tuple[duckdb.DuckDBPyConnection, bool]:
    """Open a workspace for writing, creating it from the template when it does not exist; a
    template DuckDB cannot open (damaged) is removed and the workspace created directly. Also
    returns whether it is a fresh copy of the template, which holds this layer's schema already."""
    if path.exists() or Path(f"{path}.wal").exists():
        return _connect(path, read_only=False), False
    if not path.absolute().parent.is_dir():
        raise UserError(f"cannot create workspace {path}: folder {path.absolute().parent} does not exist")
    template = _create_from_template(path)
    try:
        return _connect(path, read_only=False), template is not None
    except UserError:
        if template is None:
            raise
        for damaged in (path, template):
            with contextlib.suppress(OSError):
                damaged.unlink(missing_ok=True)
        return _connect(path, read_only=False), False


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def open_workspace(
    path: str | Path,
    read_only: bool = False,
    must_exist: bool = False,
    analyse: bool = True,
    needs: analysis.Wanted = "all",
) -> duckdb.DuckDBPyConnection:
    """A connection with the canonical tables, the live views and up-to-date stored results.

    `needs`: what the caller reads (stored results or any query names; "all"; None: the first
    answers). Those results, if missing or stale (the files, settings or queries changed since
    they were computed), are computed here, once, with one line on stderr saying why, and
    stored; analyse=False skips that (ingest computes them itself, after loading).
    """
    path = Path(path)
    con = _open(path, read_only, must_exist)
    settings_as_variables(con)
    if not analyse:
        return con
    if not read_only:
        analysis.refresh(con, say=_say, progress=None, wanted=needs)
        return con
    if not analysis.plan(con, needs).needed:
        return con
    con.close()
    try:
        writer = _connect(path, read_only=False)
        try:
            _ensure_schema(writer)
            settings_as_variables(writer)
            progress, done = analysis.tty_progress("analysis")
            try:
                analysis.refresh(writer, say=_say, progress=progress, wanted=needs)
            finally:
                done()
        finally:
            writer.close()
        con = _connect(path, read_only=True)
        settings_as_variables(con)
    except (WorkspaceBusy, UserError):  # cannot write it: compute for this session only
        con = _connect(path, read_only=True)
        settings_as_variables(con)
        _say("analysis out of date and the workspace cannot be written: computing it for this command only")
        analysis.compute_in_session(con, needs)
    return con


def _open(path: Path, read_only: bool, must_exist: bool) -> duckdb.DuckDBPyConnection:
    if (read_only or must_exist) and not path.exists():
        raise UserError(f"no workspace at {path}: run `nsight-analyze ingest DIR` first (or pass --db)")
    if not read_only:
        con, from_template = _connect_new(path)
        if not from_template:  # a copy of the template is what it makes (0.08 s of CPU saved)
            _ensure_schema(con)
        return con
    con = _connect(path, read_only=True)
    try:
        stored = con.execute("SELECT value FROM meta WHERE key = 'queries_hash'").fetchone()
    except duckdb.CatalogException:
        con.close()
        raise UserError(f"{path} is a DuckDB file but not an nsight-analyze workspace") from None
    if stored is None or stored[0] != queries_hash():
        # Stale views: refresh them in the file when we can, else shadow them for this session.
        con.close()
        try:
            writer = _connect(path, read_only=False)
            _ensure_schema(writer)
            writer.close()
            con = _connect(path, read_only=True)
        except WorkspaceBusy:
            con = _connect(path, read_only=True)
            load_live_queries(con, temporary=True)
    return con
