"""The rank store: each file's canonical rows and rank-local results as Parquet, beside the workspace.

Why: a worker process (local or on a Dask cluster) reads one file and computes its rank-local
results without touching the workspace, which only one process may write. It leaves them here,
`NAME.ranks/<key>/` beside `NAME.duckdb`, and the client moves them into the workspace one file
per transaction. An entry is written under a temporary name and renamed when complete, so a
partial entry is never read; an entry whose file has landed is removed (the workspace holds the
rows), so what remains after a killed client is exactly the work a rerun can reuse.

Layout of an entry:
    manifest.json               what the task read and computed (counts, warnings, stamp)
    canonical/<table>.parquet   the file's rows of each canonical table (zstd)
    results/<table>.parquet     the file's ranks' rank-local results (zstd)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import duckdb

MANIFEST = "manifest.json"
PARQUET = "(FORMAT parquet, COMPRESSION zstd)"


def store_dir(db: Path) -> Path:
    """`NAME.ranks/` beside the workspace `NAME.duckdb`."""
    return db.with_name(f"{db.stem}.ranks")


def entry_key(sha256: str, ranks: dict, rank_sources: dict, job_ranks: dict, stamp: str) -> str:
    """What an entry's content depends on: the file, the rank numbers it was given and the
    analysis it was computed with. The file_id is not part of it: it is set when the entry lands."""
    numbering = json.dumps([sorted(ranks.items()), sorted(rank_sources.items()), sorted(job_ranks.items())])
    return hashlib.sha256(f"{sha256}|{numbering}|{stamp}".encode()).hexdigest()[:24]


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
            con.execute(
                f'COPY (SELECT * FROM "{table}") TO {_quote(tmp / kind / f"{table}.parquet")} {PARQUET}'
            )
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


def insert_canonical(con: duckdb.DuckDBPyConnection, entry: Path, file_id: int) -> None:
    """Append an entry's canonical rows to the workspace's tables (inside the caller's
    transaction), under the file_id the client gave the file."""
    for table, path in tables(entry, "canonical").items():
        columns = {
            r[0] for r in con.execute(f"DESCRIBE SELECT * FROM read_parquet({_quote(path)})").fetchall()
        }
        select = f"* REPLACE ({int(file_id)} AS file_id)" if "file_id" in columns else "*"
        con.execute(f'INSERT INTO "{table}" BY NAME SELECT {select} FROM read_parquet({_quote(path)})')


def remove_entry(entry: Path) -> None:
    shutil.rmtree(entry, ignore_errors=True)


def remove_if_empty(store: Path) -> None:
    try:
        store.rmdir()
    except OSError:  # entries a rerun can reuse (or not there)
        pass


def clear_partials(store: Path) -> None:
    """Temporary folders of tasks that died before renaming them."""
    if store.is_dir():
        for tmp in store.glob(".*.partial"):
            shutil.rmtree(tmp, ignore_errors=True)
