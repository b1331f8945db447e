"""Every table a user may query, as one zstd Parquet file each, plus a manifest.

Why: notebooks and data platforms (pandas, Polars, Spark, another DuckDB) read Parquet without
nsight-analyze or this DuckDB version; the stored analysis tables are the answers, so they are
exported as computed, beside the canonical rows they came from and the public live views
(aligned_kernels, ...), which are cheap projections a reader would otherwise have to rebuild.

DuckDB writes each file itself (`COPY ... TO ... (FORMAT parquet)`: queries/export/parquet.sql),
streaming: memory does not grow with the table. Each file is written under a temporary name in
OUT and renamed when complete, and `manifest.json` (names, row counts, columns) is written last,
the same way: an export killed half-way leaves whole files and no manifest claiming the missing ones.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import duckdb

from .. import __version__
from ..errors import UserError
from ..store import query_layer, schema
from ..store.duck import no_room, no_room_error, out_of_memory
from ..store.query_layer import statements
from . import replace_atomically, sql_path, write_atomically

SQL = statements("export/parquet")

MANIFEST = "manifest.json"
FORMAT_NAME = "nsight-analyze-parquet"
FORMAT_VERSION = 1


@dataclass
class ExportedTable:
    """One file of the export, as the manifest lists it."""

    name: str
    kind: str  # canonical | stored | view
    rows: int
    columns: list[tuple[str, str]]  # (name, DuckDB type)
    by_rank: bool  # only the selected ranks' rows (the table has a `rank` column)

    @property
    def file(self) -> str:
        return f"{self.name}.parquet"

    def as_json(self) -> dict:
        return {
            "name": self.name,
            "file": self.file,
            "kind": self.kind,
            "rows": self.rows,
            "columns": [{"name": n, "type": t} for n, t in self.columns],
            "filtered_by_rank": self.by_rank,
        }


@dataclass
class ParquetExport:
    """What `export_parquet` wrote (the command prints it)."""

    folder: Path
    tables: list[ExportedTable] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables)


def exported_objects() -> list[tuple[str, str]]:
    """(name, kind) of everything exported: canonical tables, then the public stored results,
    then the public live views (canonical ones in schema order, the others by name, so two
    exports list the same order). Macros are left out: they take parameters, so they have no
    rows of their own."""
    out = [(name, "canonical") for name in schema.schema_tables()]
    seen = {name for name, _ in out}
    layer = sorted(
        (q for q in query_layer.layer() if not q.private and q.name not in seen), key=lambda q: q.name
    )
    out += [(q.name, "stored") for q in layer if q.result == "stored" and q.stage != "live"]
    out += [(q.name, "view") for q in layer if q.stage == "live" and q.kind == "view"]
    return out


def _present(con: duckdb.DuckDBPyConnection) -> set[str]:
    """Tables and views the connection resolves by plain name (TEMP shadows included: a workspace
    computed for this session only has its results there)."""
    return {r for (r,) in con.execute(SQL["present_objects"]).fetchall()}


def check_folder(out: Path, force: bool) -> None:
    """OUT must be a folder that is absent or empty, or --force: never mix two exports unasked."""
    if out.exists() and not out.is_dir():
        raise UserError(f"{out} exists and is not a folder: --format parquet writes a folder of files")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise UserError(f"{out} is not empty: choose an empty or new folder, or pass --force to overwrite")


def export_parquet(
    con: duckdb.DuckDBPyConnection,
    out: Path,
    ranks: list[int] | None = None,
    force: bool = False,
    workspace: str | None = None,
) -> ParquetExport:
    """Write OUT/<name>.parquet for every exported object and OUT/manifest.json.

    `ranks`: only those ranks' rows of the tables with a `rank` column (job-level tables
    without one, such as `collectives`, are exported whole; the manifest says which are
    filtered). With `force`, files an earlier export listed in its manifest and this one does
    not write are removed, so the folder holds exactly what the new manifest lists.
    """
    check_folder(out, force)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    earlier = _earlier_files(out)
    present = _present(con)
    result = ParquetExport(out)
    rank_list = (", ".join(str(int(r)) for r in ranks) or "NULL") if ranks is not None else None
    try:
        for name, kind in exported_objects():
            if name not in present:
                continue  # e.g. a format-specific table an older workspace lacks
            result.tables.append(_write(con, out, name, kind, rank_list))
    except BaseException:
        if created:  # a failed export (a full disk, Ctrl-C) leaves no folder of some of the tables
            shutil.rmtree(out, ignore_errors=True)
        raise
    manifest = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "nsight_analyze_version": __version__,
        "exported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "workspace": workspace,
        "compression": "zstd",
        "ranks": ranks,
        "tables": [t.as_json() for t in result.tables],
    }
    write_atomically(out / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    for stale in earlier - {t.file for t in result.tables}:
        (out / stale).unlink(missing_ok=True)
    return result


def _write(
    con: duckdb.DuckDBPyConnection, out: Path, name: str, kind: str, rank_list: str | None
) -> ExportedTable:
    """OUT/<name>.parquet; `rank_list`: the selected ranks (as `rows_of_ranks` takes them), None
    for all."""
    final = out / f"{name}.parquet"
    tmp = out / f".{name}.parquet.tmp-{os.getpid()}"
    try:
        described = con.execute(SQL.sql("object_columns", object=name)).fetchall()
        columns = [(str(c[0]), str(c[1])) for c in described]
        by_rank = rank_list is not None and any(c == "rank" for c, _ in columns)
        query = (
            SQL.sql("rows_of_ranks", object=name, ranks=rank_list)
            if by_rank
            else SQL.sql("all_rows", object=name)
        )
        (rows,) = con.execute(SQL.sql("copy_to_parquet", query=query, path=sql_path(tmp))).fetchone()
    except duckdb.OutOfMemoryException:
        tmp.unlink(missing_ok=True)
        raise out_of_memory(f"exporting {name}") from None
    except duckdb.Error as exc:
        tmp.unlink(missing_ok=True)
        if no_room(exc):
            raise no_room_error(exc) from None
        raise UserError(f"cannot export {name}: {str(exc).splitlines()[0]}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    replace_atomically(tmp, final)
    return ExportedTable(name, kind, int(rows), columns, by_rank)


def _earlier_files(out: Path) -> set[str]:
    """The Parquet files an earlier export's manifest lists (plain names in OUT only)."""
    try:
        manifest = json.loads((out / MANIFEST).read_text())
        files = {t["file"] for t in manifest.get("tables", [])}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return set()
    return {f for f in files if isinstance(f, str) and f.endswith(".parquet") and Path(f).name == f}
