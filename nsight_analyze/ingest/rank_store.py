"""The rank store: batches of files' canonical rows and rank-local results as Parquet, beside the
workspace.

Why: a worker process (local or on a Dask cluster) reads one file and computes its rank-local
results without touching the workspace, which only one process may write. It leaves them here,
one entry per task (a batch of files), `NAME.ranks/<key>/` beside `NAME.duckdb`, and the client
moves them into the workspace one entry per transaction. An entry is written under a temporary
name and renamed when complete, so a partial entry is never read; the store is removed when the
ingest completes (the workspace holds the rows), so what remains after a killed client is the
work a rerun of the same files can reuse.

Layout of an entry:
    manifest.json               what the task read and computed (per file: counts, warnings,
                                error; the analysis stamp)
    canonical/<table>.parquet   the batch's rows of each canonical table (zstd)
    results/<table>.parquet     the batch's ranks' rank-local results (zstd)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import duckdb

from ..store.query_layer import statements

MANIFEST = "manifest.json"
SQL = statements("ingest/rank_store")


def store_dir(db: Path) -> Path:
    """`NAME.ranks/` beside the workspace `NAME.duckdb`."""
    return db.with_name(f"{db.stem}.ranks")


def file_key(sha256: str, ranks: dict, rank_sources: dict, job_ranks: dict, stamp: str) -> str:
    """What a file's share of an entry depends on: the file, the rank numbers it was given and
    the analysis it was computed with. Its file_id is not part of it: it is set when it lands."""
    numbering = json.dumps([sorted(ranks.items()), sorted(rank_sources.items()), sorted(job_ranks.items())])
    return hashlib.sha256(f"{sha256}|{numbering}|{stamp}".encode()).hexdigest()[:24]


def entry_key(file_keys: list[str]) -> str:
    """An entry's name: the keys of the files it holds, in order."""
    return hashlib.sha256("|".join(file_keys).encode()).hexdigest()[:24]


def _quote(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def write_entry(
    con: duckdb.DuckDBPyConnection,
    entry: Path,
    canonical: list[str],
    results: list[str],
    manifest: dict,
) -> None:
    """COPY each table to Parquet under a temporary folder, then rename it to `entry` (atomic)."""
    tmp = entry.with_name(f".{entry.name}.{os.getpid()}.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    for kind, tables in (("canonical", canonical), ("results", results)):
        (tmp / kind).mkdir(parents=True)
        for table in tables:
            con.execute(SQL.sql("copy_to_parquet", table=table, path=_quote(tmp / kind / f"{table}.parquet")))
    (tmp / MANIFEST).write_text(json.dumps(manifest))
    shutil.rmtree(entry, ignore_errors=True)  # an older, equal entry (a retried task)
    os.replace(tmp, entry)


def read_manifest(entry: Path) -> dict | None:
    """The manifest of a complete entry, None when there is none (never written or removed)."""
    try:
        return json.loads((entry / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def tables(entry: Path, kind: str) -> dict[str, Path]:
    """{table: parquet path} of an entry's `canonical` or `results` part."""
    return {p.stem: p for p in sorted((entry / kind).glob("*.parquet"))}


def insert_canonical(con: duckdb.DuckDBPyConnection, entry: Path, file_ids: dict[int, int]) -> None:
    """Append an entry's canonical rows to the workspace's tables (inside the caller's
    transaction), each file's rows under the file_id the client gives it now ({the task's
    file_id: the client's}; they differ when an earlier, killed ingest left the entry)."""
    moved = {int(a): int(b) for a, b in file_ids.items() if a != b}
    whens = " ".join(SQL.sql("file_id_when", old=a, new=b) for a, b in moved.items())
    renumber = SQL.sql("renumbered_rows", whens=whens)
    for table, path in tables(entry, "canonical").items():
        columns = {r[0] for r in con.execute(SQL.sql("parquet_columns", path=_quote(path))).fetchall()}
        select = renumber if moved and "file_id" in columns else "*"
        con.execute(SQL.sql("insert_parquet", table=table, select=select, path=_quote(path)))


def remove_store(store: Path) -> None:
    """The whole store, once an ingest has landed what it could (what is left is of no use)."""
    shutil.rmtree(store, ignore_errors=True)


def clear_partials(store: Path) -> None:
    """Temporary folders of tasks that died before renaming them."""
    if store.is_dir():
        for tmp in store.glob(".*.partial"):
            shutil.rmtree(tmp, ignore_errors=True)
