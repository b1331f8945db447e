"""Nsight Systems SQLite exports -> canonical tables: the source interface (sniff, probe, load).

Event tables are streamed by DuckDB's SQLite reader straight into the workspace
(`INSERT ... SELECT` over an attached, read-only export), with names joined from
StringIds on the way; Python never touches individual events. Each SELECT is built
from the columns the file actually has, so every export schema from 2021 to 2026 loads.
The statements are nsys_loader.py's (queries/sources/nsys_loader.sql, one per table), written
through nsys_query.py's helpers; the file's metadata (processes, GPUs, environment) is nsys_meta.py's.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import duckdb

from ..store.duck import attach_sqlite
from . import nsys_meta
from .base import BadInput, LoadResult, Probe, Process
from .nsys_loader import Loader
from .nsys_meta import PID_DIVISOR, NsysMeta

FORMAT = "nsys-sqlite"
SUFFIXES = (".sqlite", ".sqlite3")

_attach_counter = itertools.count()


def sniff(path: Path) -> bool:
    """By suffix alone: a .sqlite file that is not an export deserves a 'why', not silence."""
    return path.suffix.lower() in SUFFIXES


def probe(path: Path) -> Probe:
    con = nsys_meta.connect_readonly(path)
    try:
        meta = nsys_meta.read_meta(con, path)
    finally:
        con.close()
    env_rank, env_source = _env_int(meta, nsys_meta.RANK_VARIABLES)
    processes = []
    single = len(meta.gpu_processes) == 1
    for gpid, dev in sorted(meta.gpu_processes.items(), key=lambda kv: (kv[1] is None, kv[1], kv[0])):
        claimed, source = None, None
        if single and env_rank is not None:
            claimed, source = env_rank, env_source
        elif gpid in meta.mpi_ranks:
            claimed, source = meta.mpi_ranks[gpid], "mpi"
        elif gpid in meta.nccl_ranks:
            claimed, source = meta.nccl_ranks[gpid], "nccl"
        processes.append(
            Process(
                key=gpid,
                pid=gpid // PID_DIVISOR % PID_DIVISOR,
                device_id=dev,
                claimed_rank=claimed,
                rank_source=source,
                hostname=meta.hostname,
                local_rank=_env_int(meta, nsys_meta.LOCAL_RANK_VARIABLES)[0] if single else None,
                world_size=_env_int(meta, nsys_meta.WORLD_SIZE_VARIABLES)[0] or meta.nccl_world.get(gpid),
                gpu_name=meta.gpus.get((gpid, dev)).name if meta.gpus.get((gpid, dev)) else None,
                session_start_utc_ns=meta.session_start_utc_ns,
            )
        )
    if len(meta.gpu_processes) > 1 and env_rank is not None:
        meta.warnings.append(
            f"{len(processes)} processes in one file: the captured {env_source[4:]} belongs to the launcher, "
            "ranks numbered by device"
        )
    return Probe(
        format=FORMAT,
        processes=processes,
        version=meta.nsys_version,
        schema_version=meta.schema_version,
        warnings=list(meta.warnings),
        context=meta,
    )


def _env_int(meta: NsysMeta, names: tuple[str, ...]) -> tuple[int | None, str | None]:
    for name in names:
        value = meta.env.get(name, "").strip()
        if value.isdigit():
            return int(value), f"env:{name}"
    return None, None


_attached: list[tuple[duckdb.DuckDBPyConnection, str]] = []


def load(
    con: duckdb.DuckDBPyConnection, path: Path, file_id: int, ranks: dict[int, int], probe: Probe
) -> LoadResult:
    meta: NsysMeta = probe.context
    result = LoadResult(warnings=list(probe.warnings))
    alias = f"nsys_src_{next(_attach_counter)}"
    try:
        attach_sqlite(con, path, alias)
    except duckdb.Error as exc:
        raise BadInput(f"DuckDB cannot read the export ({str(exc).splitlines()[0]})") from None
    _attached.append((con, alias))
    try:
        Loader(con, alias, meta, file_id, ranks, result).load_all()
    except duckdb.Error as exc:
        raise BadInput(f"failed while reading events ({str(exc).splitlines()[0]})") from None
    return result


def release(con: duckdb.DuckDBPyConnection) -> None:
    """Detach the exports attached by load(); DuckDB forbids it inside the load's transaction."""
    for item in [a for a in _attached if a[0] is con]:
        _attached.remove(item)
        try:
            con.execute(f"DETACH {item[1]}")
        except duckdb.Error:
            pass
