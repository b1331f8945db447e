"""Files' rows into the workspace, in one transaction: one file read by its source in this
process (`load_one`), or a batch of files from the rank-store entry a worker filled
(`land_batch`). A file that fails leaves nothing behind; `delete_file` removes what a file owns
when it is replaced.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from ..sources import registry
from ..sources.base import BadInput
from ..store import schema
from ..store.duck import no_room, rollback, sql_row, sql_value
from ..store.query_layer import statements
from . import rank_store
from .discovery import Candidate
from .rank_task import Mapped, load_file

SQL = statements("ingest/landing")


@dataclass
class FileOutcome:
    path: Path
    status: str  # ok | unchanged | failed | skipped | ignored
    message: str = ""
    file_id: int | None = None
    ranks: list[int] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


def load_one(con: duckdb.DuckDBPyConnection, cand: Candidate) -> FileOutcome:
    """One file read by its source into the workspace (rank_task.load_file: its kernels
    classified too), in one transaction."""
    started = time.perf_counter()
    probe = cand.probe
    con.execute("BEGIN TRANSACTION")
    try:
        for fid in cand.replaces:
            delete_file(con, fid)
        result = load_file(
            con,
            cand.source,
            cand.readable,
            cand.file_id,
            probe,
            cand.ranks,
            cand.rank_sources,
            cand.job_ranks,
        )
        insert_file_row(con, cand, result.warnings, result.skipped)
        con.execute("COMMIT")
    except (BadInput, duckdb.Error) as exc:
        rollback(con)
        if no_room(exc):  # the workspace's disk, not the file, is at fault: the ingest stops
            raise
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return FileOutcome(cand.path, "failed", message, seconds=time.perf_counter() - started)
    except BaseException:
        rollback(con)
        raise
    finally:
        if hasattr(cand.source, "release"):
            cand.source.release(con)
    warn = f"{len(result.warnings)} warning(s)" if result.warnings else ""
    return FileOutcome(
        cand.path,
        "ok",
        warn,
        cand.file_id,
        sorted(cand.ranks.values()),
        result.counts,
        time.perf_counter() - started,
    )


def delete_file(con: duckdb.DuckDBPyConnection, file_id: int) -> None:
    """Every row a file owns: its ranks' rows, and its own (schema.owned_by)."""
    ranks = [r[0] for r in con.execute("SELECT rank FROM ranks WHERE file_id = ?", [file_id]).fetchall()]
    if ranks:
        by_file = registry.rank_tables_owned_by_file()
        for table in schema.owned_by(con, "rank"):
            # DCGM samples matched to these ranks belong to their own file (match_ranks re-matches them)
            own = SQL["dcgm_rows_kept"] if table == "gpu_metrics" else ""
            if table in by_file:  # rows an input read beside these ranks owns (sources/base.py)
                own = SQL.sql("file_rows_only", file_id=int(file_id))
            con.execute(SQL.sql("delete_rank_rows", table=table, owned=own), [ranks])
    for table in [*schema.owned_by(con, "file_id"), "files"]:
        con.execute(SQL.sql("delete_file_rows", table=table), [file_id])


def land_batch(
    con: duckdb.DuckDBPyConnection, files: list[tuple[Candidate, Mapped]], entry: Path
) -> list[FileOutcome]:
    """A batch's rank-store entry into the workspace, in one transaction: the files the worker
    loaded land together; the ones it could not load are reported failed with its reason."""
    good = [(cand, m) for cand, m in files if m.error is None]
    failed = [FileOutcome(cand.path, "failed", m.error) for cand, m in files if m.error is not None]
    if not good:
        return failed
    con.execute("BEGIN TRANSACTION")
    try:
        for cand, _ in good:
            for fid in cand.replaces:
                delete_file(con, fid)
        rank_store.insert_canonical(con, entry, {m.file_id: cand.file_id for cand, m in good})
        for cand, m in good:
            insert_file_row(con, cand, m.warnings, m.skipped)
        con.execute("COMMIT")
    except duckdb.Error as exc:
        rollback(con)
        if no_room(exc):
            raise
        reason = f"its worker's results could not be read ({str(exc).splitlines()[0]})"
        return failed + [FileOutcome(cand.path, "failed", reason) for cand, _ in good]
    except BaseException:
        rollback(con)
        raise
    return failed + [
        FileOutcome(
            cand.path,
            "ok",
            f"{len(m.warnings)} warning(s)" if m.warnings else "",
            cand.file_id,
            sorted(cand.ranks.values()),
            m.counts,
        )
        for cand, m in good
    ]


def insert_file_row(
    con: duckdb.DuckDBPyConnection, cand: Candidate, warnings: list[str], skipped: list[str]
) -> None:
    probe = cand.probe
    values = (
        cand.file_id,
        str(cand.path.resolve()),
        cand.sha256,
        registry.input_size(cand.path, cand.source),  # a folder input: its files' total
        probe.format,
        probe.version,
        probe.schema_version,
    )
    con.execute(
        SQL.sql(
            "insert_file", values=sql_row(values), warnings=sql_value(warnings), skipped=sql_value(skipped)
        )
    )
    if cand.labels:  # the run's labels (run_labels.py), in the file's own transaction
        rows = ", ".join(f"({int(cand.file_id)}, {sql_row(label)})" for label in cand.labels)
        con.execute(SQL.sql("insert_run_labels", rows=rows))
