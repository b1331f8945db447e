"""One file's rows into the workspace, in one transaction: read by its source in this process
(`load_one`) or from the rank store a worker filled (`land_entry`). A file that fails leaves
nothing behind; `delete_file` removes what a file owns when it is replaced.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from . import classify, rank_store
from .discovery import Candidate
from .rank_task import Mapped, insert_ranks
from .sources import nsys_recipe
from .sources.base import BadInput


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
    """One file read by its source into the workspace, in one transaction."""
    started = time.perf_counter()
    probe = cand.probe
    con.execute("BEGIN TRANSACTION")
    try:
        for fid in cand.replaces:
            delete_file(con, fid)
        result = cand.source.load(con, cand.readable, cand.file_id, cand.ranks, probe)
        insert_ranks(con, cand.file_id, probe, cand.ranks, cand.rank_sources, cand.job_ranks)
        classify.classify_kernels(con)
        insert_file_row(con, cand, result.warnings, result.skipped)
        con.execute("COMMIT")
    except (BadInput, duckdb.Error) as exc:
        con.execute("ROLLBACK")
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return FileOutcome(cand.path, "failed", message, seconds=time.perf_counter() - started)
    except BaseException:
        con.execute("ROLLBACK")
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


# What a file owns, keyed by its ranks or by its file_id (schema.sql and schema_*.sql).
RANK_TABLES = (
    "kernels",
    "memops",
    "cuda_api",
    "sync",
    "nvtx",
    "gpu_metrics",
    "threads",
    "gpus",
    "kineto_collectives",
    "kineto_gpu_annotations",
    "kineto_process_groups",
    "memory_usage",
    "kineto_profiler_ranges",
    "recipe_nvtx_gpu_proj",
)
FILE_TABLES = (
    "env",
    "ncu_kernels",
    "ncu_metrics",
    "ncu_peaks",
    "recipe_outputs",
    "gpu_metrics",
    "ranks",
    "files",
)  # fmt: skip  (gpu_metrics: DCGM rows have a file but no rank)


def delete_file(con: duckdb.DuckDBPyConnection, file_id: int) -> None:
    ranks = [r[0] for r in con.execute("SELECT rank FROM ranks WHERE file_id = ?", [file_id]).fetchall()]
    if ranks:
        for table in RANK_TABLES:
            # DCGM samples matched to these ranks belong to their own file (match_ranks re-matches them)
            own = " AND source IS DISTINCT FROM 'dcgm'" if table == "gpu_metrics" else ""
            con.execute(f"DELETE FROM {table} WHERE rank IN (SELECT unnest(?::INTEGER[])){own}", [ranks])
    for table in FILE_TABLES:
        con.execute(f"DELETE FROM {table} WHERE file_id = ?", [file_id])


def land_entry(con: duckdb.DuckDBPyConnection, cand: Candidate, entry: Path, mapped: Mapped) -> FileOutcome:
    """One file's rank-store entry into the workspace, in one transaction."""
    con.execute("BEGIN TRANSACTION")
    try:
        for fid in cand.replaces:
            delete_file(con, fid)
        rank_store.insert_canonical(con, entry, cand.file_id)
        insert_file_row(con, cand, mapped.warnings, mapped.skipped)
        con.execute("COMMIT")
    except duckdb.Error as exc:
        con.execute("ROLLBACK")
        return FileOutcome(
            cand.path, "failed", f"its worker's results could not be read ({str(exc).splitlines()[0]})"
        )
    except BaseException:
        con.execute("ROLLBACK")
        raise
    warn = f"{len(mapped.warnings)} warning(s)" if mapped.warnings else ""
    return FileOutcome(
        cand.path, "ok", warn, cand.file_id, sorted(cand.ranks.values()), mapped.counts, mapped.seconds
    )


def insert_file_row(
    con: duckdb.DuckDBPyConnection, cand: Candidate, warnings: list[str], skipped: list[str]
) -> None:
    probe = cand.probe
    con.execute(
        "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?, now(), 'ok', ?, ?)",
        [
            cand.file_id,
            str(cand.path.resolve()),
            cand.sha256,
            nsys_recipe.input_size(cand.path),  # a recipe output folder: its files' total
            probe.format,
            probe.version,
            probe.schema_version,
            warnings,
            skipped,
        ],
    )
