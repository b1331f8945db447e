"""Metadata of an Nsight Systems SQLite export, read with Python's sqlite3.

Only small tables are read here (metadata, environment, GPU info, process lists); the
event tables are streamed by DuckDB in `nsys_sqlite.py`. Everything is keyed on the
presence of tables and columns, never on version strings, because NVIDIA changes the
schema between releases (see ../shared/docs/nsys-sqlite-schema.md).
"""

from __future__ import annotations

import itertools
import re
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ..store.query_layer import statements
from .base import BadInput

SQL = statements("sources/nsys_meta")

SQLITE_MAGIC = b"SQLite format 3\x00"
PID_DIVISOR = 1 << 24  # globalTid = [hw:8][vm:8][pid:24][tid:24]

# Tables whose presence marks an Nsight Systems export.
NSYS_MARKERS = {
    "StringIds",
    "TARGET_INFO_SESSION_START_TIME",
    "ANALYSIS_DETAILS",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "NVTX_EVENTS",
    "TARGET_INFO_SYSTEM_ENV",
}

RANK_VARIABLES = (
    "RANK",
    "OMPI_COMM_WORLD_RANK",
    "PMIX_RANK",
    "PMI_RANK",
    "SLURM_PROCID",
    "MV2_COMM_WORLD_RANK",
)
LOCAL_RANK_VARIABLES = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID")
WORLD_SIZE_VARIABLES = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")

# Environment variables worth keeping in the workspace; everything else stays out.
ENV_ALLOW = re.compile(
    r"^(RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|GROUP_RANK|NODE_RANK|OMPI_COMM_WORLD_\w+|PMIX_RANK|PMI_RANK|"
    r"PMI_SIZE|SLURM_PROCID|SLURM_LOCALID|SLURM_NTASKS|SLURM_NNODES|SLURM_JOB_NUM_NODES|SLURMD_NODENAME|"
    r"CUDA_VISIBLE_DEVICES|CUDA_DEVICE_MAX_CONNECTIONS|CUDA_LAUNCH_BLOCKING|NCCL_\w+|TORCH_NCCL_\w+|"
    r"PEAK_FLOPS\w*|OMP_NUM_THREADS|HOSTNAME)$"
)
SECRET_NAME = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY|ACCESS_KEY|PRIVATE|CREDENTIAL|AUTH)", re.I
)


def keep_env(name: str) -> bool:
    """Allow-listed and not secret-looking: the only environment the workspace stores."""
    return bool(ENV_ALLOW.match(name)) and not SECRET_NAME.search(name)


@dataclass
class GpuInfo:
    name: str | None = None
    sm_count: int | None = None
    clock_hz: int | None = None
    memory_bandwidth_bps: int | None = None
    memory_bytes: int | None = None
    compute_major: int | None = None
    compute_minor: int | None = None
    uuid: str | None = None
    bus_location: str | None = None
    source: str = "unknown"


KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
KERNEL_NAME_IDS = ("demangledName", "shortName")
COUNTED_TABLES = ("CUPTI_ACTIVITY_KIND_RUNTIME",)  # the loader compares what it kept with these


@dataclass
class NsysMeta:
    tables: dict[str, list[str]]  # table -> column names
    nsys_version: str | None = None
    schema_version: str | None = None
    session_start_utc_ns: int | None = None
    hostname: str | None = None
    env: dict[str, str] = field(default_factory=dict)  # full parsed environment (never stored whole)
    mpi_ranks: dict[int, int] = field(default_factory=dict)  # globalPid -> MPI rank
    nccl_ranks: dict[int, int] = field(default_factory=dict)  # globalPid -> rank in NCCL's init payload
    nccl_world: dict[int, int] = field(default_factory=dict)  # globalPid -> largest communicator it joined
    gpu_processes: dict[int, int | None] = field(default_factory=dict)  # globalPid -> main deviceId
    gpus: dict[tuple[int, int | None], GpuInfo] = field(default_factory=dict)  # (globalPid, deviceId)
    kernel_name_ids: list[tuple[int, int]] = field(default_factory=list)  # KERNEL_NAME_IDS, -1: none
    row_counts: dict[str, int] = field(default_factory=dict)  # of the tables in COUNTED_TABLES
    warnings: list[str] = field(default_factory=list)

    def has(self, table: str, column: str | None = None) -> bool:
        cols = self.tables.get(table)
        return cols is not None and (column is None or column in cols)


def _decode(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def connect_readonly(path: Path) -> sqlite3.Connection:
    """Open an export read-only and immutable: nothing is ever written next to the user's file."""
    with open(path, "rb") as fh:
        head = fh.read(100)
    if not head:
        raise BadInput("empty file")
    if not head.startswith(SQLITE_MAGIC):
        raise BadInput("not an SQLite database (wrong file header)")
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
        con.text_factory = bytes
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        raise BadInput(f"unreadable SQLite database ({exc})") from None
    return con


def parse_environment(block: str) -> dict[str, str]:
    """NAME=VALUE entries separated by NUL (2.9.1), ';' (3.4.0+) or newlines.

    Values may themselves contain ';' (LS_COLORS), so a new entry starts only where a
    separator is followed by something shaped like a variable name and '='.
    """
    env: dict[str, str] = {}
    pattern = re.compile(
        r"(?:^|[\x00;\n])([A-Za-z_][A-Za-z0-9_]*)=([^\x00]*?)(?=[\x00;\n][A-Za-z_][A-Za-z0-9_]*=|\x00|$)"
    )
    for match in pattern.finditer(block):
        env.setdefault(match.group(1), match.group(2))
    return env


class _Census:
    """GROUP BY counts over big event tables, through DuckDB's SQLite reader (several times
    faster than sqlite3 on millions of rows).

    One DuckDB instance per process holds the reader, and each census attaches its file under a
    name of its own on a cursor of it: loading the reader into a fresh instance took 0.13 s, most
    of a probe, so 11 s of the 64-file ingest of 20k-kernel ranks went to probing."""

    _instance = None
    _lock = threading.Lock()
    _names = itertools.count()

    def __init__(self, path: Path):
        import duckdb

        from ..store.duck import attach_sqlite, load_sqlite_reader, offline

        with _Census._lock:
            if _Census._instance is None:
                _Census._instance = offline(duckdb.connect())
                load_sqlite_reader(_Census._instance)
            self.con = _Census._instance.cursor()
            self.alias = f"census_{next(_Census._names)}"
        try:
            attach_sqlite(self.con, path, self.alias)
        except BaseException:
            self.con.close()
            raise

    def table(self, name: str) -> str:
        """The attached file's table `name`, qualified."""
        return f'{self.alias}."{name}"'

    def rows(self, sql: str) -> list[tuple]:
        return self.con.execute(sql).fetchall()

    def close(self) -> None:
        try:
            self.con.execute(f"DETACH {self.alias}")
        finally:
            self.con.close()


def read_meta(con: sqlite3.Connection, path: Path) -> NsysMeta:
    try:
        names = [_decode(r[0]) for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        tables = {n: [_decode(c[1]) for c in con.execute(f'PRAGMA table_info("{n}")')] for n in names}
    except sqlite3.DatabaseError as exc:
        raise BadInput(f"corrupt or truncated SQLite database ({exc})") from None
    if not tables:
        raise BadInput("an SQLite database with no tables, not an Nsight Systems export")
    if "StringIds" not in tables or not (NSYS_MARKERS - {"StringIds"}) & tables.keys():
        raise BadInput(
            "an SQLite database but not an Nsight Systems export (no StringIds / CUPTI / NVTX tables)"
        )
    meta = NsysMeta(tables=tables)
    try:
        _read_versions(con, meta)
        _read_session(con, meta)
        census = _Census(path)
        try:
            _read_processes(con, census, meta)
            _read_gpus(con, meta)
            for table in COUNTED_TABLES:
                if meta.has(table):  # sqlite3 counts B-tree cells without decoding rows: fast
                    meta.row_counts[table] = con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
            _read_nccl_ranks(con, meta, census)
        finally:
            census.close()
    except sqlite3.DatabaseError as exc:
        raise BadInput(f"corrupt or truncated SQLite database ({exc})") from None
    except Exception as exc:  # DuckDB's reader on a damaged file
        if type(exc).__module__.startswith(("duckdb", "_duckdb")):
            raise BadInput(f"corrupt or truncated SQLite database ({str(exc).splitlines()[0]})") from None
        raise
    return meta


NCCL_RANK_IN_PAYLOAD = re.compile(r'"Rank"\s*:\s*(\d+)')
NCCL_NRANKS_IN_PAYLOAD = re.compile(r'"No\. of ranks"\s*:\s*(\d+)')
# the probe's bound on init records: NCCL writes one per communicator a process joins
NCCL_INIT_ROWS = 10_000


def _read_nccl_ranks(con: sqlite3.Connection, meta: NsysMeta, census: _Census) -> None:
    """Rank of each process from NCCL's `ncclCommInitRank` NVTX payload (NCCL >= 2.19): the JSON
    of an export with --include-json, else the binary payload (binaryData) decoded by the loader's
    own decoder (nvtx_binary, on the census's attachment, these rows only), so both exports of one
    capture number their ranks alike. The smallest rank a process initialised wins: with several
    communicators it is the world communicator's rank, at worst a consistent guess. The largest
    communicator a process joined ("No. of ranks") stands for the world size. A probe reads at most
    NCCL_INIT_ROWS init records (the first by time), and says so when there were more; a blob no
    schema decodes gives no hint here and is counted by the loader (nvtx_binary.undecoded)."""
    from . import nvtx_binary  # lazily: only a probe of an export with binary payloads needs it

    cols = meta.tables.get("NVTX_EVENTS", [])
    binary = nvtx_binary.has_binary_payloads(meta)
    if "globalTid" not in cols or not ({"jsonText", "jsonTextId"} & set(cols) or binary):
        return
    text = SQL["init_text_resolved"] if "textId" in cols else "e.text"
    join_text = SQL["init_text_join"] if "textId" in cols else ""
    payload = {
        (True, True): SQL["init_payload_both"],
        (True, False): "j.value",
        (False, True): "e.jsonText",
        (False, False): "NULL",
    }["jsonTextId" in cols, "jsonText" in cols]
    join_json = SQL["init_json_join"] if "jsonTextId" in cols else ""
    sql = SQL.sql(
        "nccl_init_rows",
        pid_divisor=PID_DIVISOR,
        payload=payload,
        joins="".join(f" {j}" for j in (join_text, join_json) if j),
        text=text,
        blob=SQL["init_has_blob"] if binary else "0",
        order=SQL["init_order_by_start" if "start" in cols else "init_order"],
        limit=NCCL_INIT_ROWS + 1,
    )
    rows = con.execute(sql).fetchall()
    if len(rows) > NCCL_INIT_ROWS:
        meta.warnings.append(
            f"more than {NCCL_INIT_ROWS:,} ncclCommInitRank records: NCCL's rank hint read from the first "
            f"{NCCL_INIT_ROWS:,} by time"
        )
        rows = rows[:NCCL_INIT_ROWS]
    pending = [rid for rid, _, body in rows if body is None]
    decoded = dict(census.rows(nvtx_binary.decode_sql(census.alias, pending))) if pending else {}
    for rid, pid, body in rows:
        found = _decode(body) if body is not None else decoded.get(rid, "")
        gpid = int(pid) * PID_DIVISOR
        match = NCCL_RANK_IN_PAYLOAD.search(found)
        if match:
            rank = int(match.group(1))
            meta.nccl_ranks[gpid] = min(rank, meta.nccl_ranks.get(gpid, rank))
        size = NCCL_NRANKS_IN_PAYLOAD.search(found)
        if size:
            meta.nccl_world[gpid] = max(int(size.group(1)), meta.nccl_world.get(gpid, 0))


def _kv(con: sqlite3.Connection, table: str) -> dict[str, str]:
    """name -> value; of a name listed twice, the greatest value (by SQLite's order, never by the
    rows' storage order, which nsys >= 2025.6 does not keep)."""
    rows = con.execute(f'SELECT name, value FROM "{table}" ORDER BY name, value')
    return {_decode(k): _decode(v) for k, v in rows}


def _read_versions(con: sqlite3.Connection, meta: NsysMeta) -> None:
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if meta.has(table):
            kv = _kv(con, table)
            meta.nsys_version = kv.get("EXPORT_PRODUCT_VERSION")
            meta.schema_version = kv.get("EXPORT_SCHEMA_VERSION")
            break
    else:
        meta.warnings.append("no export version table: a pre-2022 export, schema detected by columns")


def _read_session(con: sqlite3.Connection, meta: NsysMeta) -> None:
    if meta.has("TARGET_INFO_SESSION_START_TIME", "utcEpochNs"):
        row = con.execute("SELECT min(utcEpochNs) FROM TARGET_INFO_SESSION_START_TIME").fetchone()
        meta.session_start_utc_ns = int(row[0]) if row and row[0] is not None else None
    if meta.session_start_utc_ns is None:
        meta.warnings.append("no session start time: this rank cannot be placed on a wall clock")
    if meta.has("TARGET_INFO_SYSTEM_ENV", "value"):
        rows = con.execute("SELECT name, value FROM TARGET_INFO_SYSTEM_ENV ORDER BY name, value").fetchall()
        for name, value in rows:
            name = _decode(name)
            if name == "Hostname":
                meta.hostname = _decode(value)
            elif name == "DeviceEnvironment" and value is not None:
                raw = value if isinstance(value, bytes) else str(value).encode()
                meta.env.update(parse_environment(raw.decode("utf-8", "replace")))
    if meta.has("META_DATA_CAPTURE"):
        for name, value in _kv(con, "META_DATA_CAPTURE").items():
            if name and name.endswith(":ENVIRONMENT_VARIABLE") and value and "=" in value:
                key, _, val = value.partition("=")
                meta.env.setdefault(key, val.strip('"'))
    if meta.has("MPI_RANKS", "rank"):
        for gtid, rank in con.execute("SELECT globalTid, rank FROM MPI_RANKS ORDER BY globalTid, rank"):
            meta.mpi_ranks[(int(gtid) // PID_DIVISOR) * PID_DIVISOR] = int(rank)


def _read_processes(con: sqlite3.Connection, census: _Census, meta: NsysMeta) -> None:
    """Processes with GPU activity are ranks; API-only processes (launchers) are reported."""
    device_rows: dict[int, dict[int | None, int]] = {}
    for table in (KERNEL_TABLE, "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        if not meta.has(table, "globalPid"):
            continue
        # the kernels' distinct name ids come with the same scan, for the loader
        ids = [SQL.sql("name_id", column=c) if meta.has(table, c) else "-1" for c in KERNEL_NAME_IDS]
        pairs = set()
        sql = SQL.sql("device_census", name_ids=", ".join(ids), table=census.table(table))
        for gpid, dev, dn, sn, n in census.rows(sql):
            counts = device_rows.setdefault(int(gpid), {})
            counts[dev] = counts.get(dev, 0) + n
            pairs.add((dn, sn))
        if table == KERNEL_TABLE:
            meta.kernel_name_ids = sorted(pairs)
    for gpid, counts in sorted(device_rows.items()):  # the census's groups come in no set order
        # the device with the most rows; of a tie, the lowest id (NULL last)
        meta.gpu_processes[gpid] = min(counts, key=lambda d: (-counts[d], d is None, d or 0))
        if len(counts) > 1:
            meta.warnings.append(
                f"process {gpid // PID_DIVISOR % PID_DIVISOR} used {len(counts)} GPUs; "
                f"rank attributed to device {meta.gpu_processes[gpid]}"
            )
    if meta.gpu_processes:
        return  # API-only processes (launchers) are found and reported by the load, for free
    api_pids = []
    if meta.has("CUPTI_ACTIVITY_KIND_RUNTIME", "globalTid"):
        api_pids = sorted(
            int(p) * PID_DIVISOR
            for (p,) in census.rows(
                SQL.sql(
                    "api_processes",
                    pid_divisor=PID_DIVISOR,
                    table=census.table("CUPTI_ACTIVITY_KIND_RUNTIME"),
                )
            )
        )
    if api_pids:
        meta.gpu_processes = {p: None for p in api_pids}
        meta.warnings.append("CUDA API calls but no GPU activity in this export")
    else:
        pid = _any_process(con, meta)
        meta.gpu_processes = {pid: None}
        meta.warnings.append("no CUDA activity in this export (CPU-only capture)")


def _any_process(con: sqlite3.Connection, meta: NsysMeta) -> int:
    """The process of a capture without CUDA rows: the one owning the NVTX events, else pid 0."""
    if meta.has("NVTX_EVENTS", "globalTid"):
        row = con.execute(SQL.sql("nvtx_main_process", pid_divisor=PID_DIVISOR)).fetchone()
        if row:
            return int(row[0]) * PID_DIVISOR
    return 0


def _gpu_from_row(cols: list[str], row: tuple, source: str) -> GpuInfo:
    rec = dict(zip(cols, row))

    def num(*keys: str) -> int | None:
        for key in keys:
            if rec.get(key) is not None:
                try:
                    return int(rec[key])
                except (TypeError, ValueError):
                    return None
        return None

    return GpuInfo(
        name=_decode(rec.get("name")),
        sm_count=num("smCount", "numMultiprocessors"),
        clock_hz=num("clockRate", "coreClockRate"),
        memory_bandwidth_bps=num("memoryBandwidth", "globalMemoryBandwidth"),
        memory_bytes=num("totalMemory", "globalMemorySize"),
        compute_major=num("computeMajor", "computeCapabilityMajor"),
        compute_minor=num("computeMinor", "computeCapabilityMinor"),
        uuid=_decode(rec.get("uuid")),
        bus_location=_decode(rec.get("busLocation") or rec.get("pciBusId")),
        source=source,
    )


def _every_column(cols: list[str]) -> str:
    """ORDER BY list of every column: of two rows for one GPU, the first in this order is kept (as
    the GPU metrics' `DISTINCT ON (id) ... ORDER BY ALL` keeps), whatever order the export stored
    them in."""
    return ", ".join(f'"{c}"' for c in cols)


def _read_gpus(con: sqlite3.Connection, meta: NsysMeta) -> None:
    """Map each process's CUDA ordinal to the physical GPU row (§7.2 of the schema doc)."""
    by_id: dict[int, GpuInfo] = {}
    by_cudev: dict[int, GpuInfo] = {}
    if meta.has("TARGET_INFO_GPU", "name") and meta.has("TARGET_INFO_GPU", "id"):
        cols = meta.tables["TARGET_INFO_GPU"]
        for row in con.execute(SQL.sql("gpu_rows", table="TARGET_INFO_GPU", columns=_every_column(cols))):
            rec = dict(zip(cols, row))
            info = _gpu_from_row(cols, row, "TARGET_INFO_GPU")
            by_id.setdefault(int(rec["id"]), info)
            if rec.get("cuDevice") is not None:
                by_cudev.setdefault(int(rec["cuDevice"]), info)
    cuda_gpu: dict[tuple[int | None, int], GpuInfo] = {}
    if meta.has("TARGET_INFO_CUDA_GPU", "deviceId"):
        cols = meta.tables["TARGET_INFO_CUDA_GPU"]
        sql = SQL.sql("gpu_rows", table="TARGET_INFO_CUDA_GPU", columns=_every_column(cols))
        for row in con.execute(sql):
            rec = dict(zip(cols, row))
            pid = int(rec["pid"]) if rec.get("pid") is not None else None
            cuda_gpu.setdefault((pid, int(rec["deviceId"])), _gpu_from_row(cols, row, "TARGET_INFO_CUDA_GPU"))
    cuda_device: dict[tuple[int, int], int] = {}
    if meta.has("TARGET_INFO_CUDA_DEVICE", "gpuId"):
        for gpu_id, cuda_id, pid in con.execute(SQL["cuda_devices"]):
            if None not in (gpu_id, cuda_id, pid):
                cuda_device[(int(pid), int(cuda_id))] = int(gpu_id)
    for gpid, dev in sorted(meta.gpu_processes.items()):
        pid = gpid // PID_DIVISOR % PID_DIVISOR  # in process order: the warnings' order is the file's
        info = None
        if dev is not None:
            if (pid, dev) in cuda_device and cuda_device[(pid, dev)] in by_id:
                info = by_id[cuda_device[(pid, dev)]]
            elif dev in by_cudev:
                info = by_cudev[dev]
            elif (pid, dev) in cuda_gpu or (None, dev) in cuda_gpu:
                info = cuda_gpu.get((pid, dev)) or cuda_gpu[(None, dev)]
            elif len(by_id) == 1:
                info = next(iter(by_id.values()))
        if info is None and dev is not None:
            meta.warnings.append(
                f"GPU model unknown for process {pid} device {dev} (no TARGET_INFO_GPU row): "
                "peaks need a hint"
            )
        meta.gpus[(gpid, dev)] = info or GpuInfo()
