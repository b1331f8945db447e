"""Writes one rank's events as an nsys SQLite export of a chosen version.

Small tables go through sqlite3; the four bulk tables are inserted by DuckDB's SQLite writer from
Arrow columns (several times faster than `executemany` over tuples). Files are deterministic:
fixed page size, no clock readings, row order fixed, optional VACUUM. The fixed tables around the
events (enums, export and capture metadata) are export_meta.py's.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from ..store.duck import load_sqlite_reader, offline
from . import memory as _memory
from . import workload as W
from .export_meta import env_text, utc_text, write_enums, write_meta
from .job import Job, RankEvents
from .schemas import VERSIONS, columns, ddl

GPU_NAME = "NVIDIA H100 80GB HBM3"
GPU_TOTAL_MEMORY = 85_045_870_592  # TARGET_INFO_GPU.totalMemory of the generated GPUs (bytes)
VM = 1 << 48
BUS = [
    "0000:18:00.0",
    "0000:2a:00.0",
    "0000:3a:00.0",
    "0000:5d:00.0",
    "0000:9a:00.0",
    "0000:ab:00.0",
    "0000:ba:00.0",
    "0000:db:00.0",
]
COPY_KIND = {"HtoD": 1, "DtoH": 2, "DtoD": 8, "PtoP": 10}


def rank_identity(job: Job, rank: int) -> dict:
    """pid, thread ids, hostname, device of a rank: pids repeat across nodes, as on real clusters."""
    g = job.cfg.gpus_per_node
    node, local = rank // g, rank % g
    pid = 51_200 + 3 * local
    return {
        "node": node,
        "local_rank": local,
        "pid": pid,
        "hostname": f"h100-node{node:02d}",
        "global_pid": VM | (pid << 24),
        "tids": [pid, pid + 57],
        "device_id": local,
        "file": f"report_rank{rank}.sqlite",
    }


def _mangle(name: str, short: str) -> str:
    return name if "(" not in name else f"_Z{len(short)}{short}v"


def _gpu_rows(job: Job, ident: dict) -> list[dict]:
    rows = []
    for i in range(job.cfg.gpus_per_node):
        h = (ident["node"] * 131 + i * 7919 + 12345) & 0xFFFFFFFF
        rows.append(
            {
                "vmId": VM,
                "id": i,
                "name": GPU_NAME,
                "busLocation": BUS[i % 8],
                "isDiscrete": 1,
                "l2CacheSize": 52_428_800,
                "totalMemory": GPU_TOTAL_MEMORY,
                "memoryBandwidth": 3_352_320_000_000,
                "clockRate": 1_980_000_000,
                "smCount": 132,
                "pwGpuId": i,
                "uuid": f"{h:08x}-5e1d-4c0a-9b7e-{ident['node']:04x}{i:08x}",
                "luid": 0,
                "chipName": "GH100",
                "cuDevice": i,
                "ctxswDevPath": "",
                "ctrlDevPath": "",
                "revision": 161,
                "nodeMask": 0,
                "constantMemory": 65536,
                "maxIPC": 0,
                "maxRegistersPerBlock": 65536,
                "maxShmemPerBlock": 49152,
                "maxShmemPerBlockOptin": 232448,
                "maxShmemPerSm": 233472,
                "maxRegistersPerSm": 65536,
                "threadsPerWarp": 32,
                "asyncEngines": 3,
                "maxWarpsPerSm": 64,
                "maxBlocksPerSm": 32,
                "maxThreadsPerBlock": 1024,
                "maxBlockDimX": 1024,
                "maxBlockDimY": 1024,
                "maxBlockDimZ": 64,
                "maxGridDimX": 2147483647,
                "maxGridDimY": 65535,
                "maxGridDimZ": 65535,
                "computeMajor": 9,
                "computeMinor": 0,
                "smMajor": 9,
                "smMinor": 0,
            }
        )
    return rows


class _Strings:
    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def __call__(self, s: str) -> int:
        if s not in self.ids:
            self.ids[s] = len(self.ids)
        return self.ids[s]


def _insert_rows(con: sqlite3.Connection, table: str, cols: list[str], rows: list[dict]) -> None:
    if not rows:
        return
    use = [c for c in cols if c in rows[0]]
    con.executemany(
        f'INSERT INTO "{table}" ({", ".join(use)}) VALUES ({", ".join("?" * len(use))})',
        [tuple(r[c] for c in use) for r in rows],
    )


def bulk_connection() -> duckdb.DuckDBPyConnection:
    """One DuckDB connection with the SQLite writer loaded, reused for every rank file."""
    d = offline(duckdb.connect())
    load_sqlite_reader(d)
    return d


def write_rank(
    job: Job, ev: RankEvents, path: Path, version: str, d: duckdb.DuckDBPyConnection, vacuum: bool = True
) -> None:
    v = VERSIONS[version]
    schema = columns(version)
    ident = rank_identity(job, ev.rank)
    node = ident["node"]
    gpid = ident["global_pid"]
    gtid = np.array([gpid | t for t in ident["tids"]], np.int64)
    strings = _Strings()
    kinds = job.catalog.kinds
    end_time = int(max(ev.gpu_end.max(initial=0), ev.api_end.max(initial=0), ev.nvtx_end.max(initial=0)))

    if path.exists():
        path.unlink()
    con = sqlite3.connect(path)
    con.execute("PRAGMA page_size = 4096")
    con.execute("PRAGMA synchronous = OFF")
    con.executescript(ddl(version))

    # strings in a fixed order: thread and process names, APIs, kernels, registered NVTX strings
    thread_names = [strings("pt_main_thread"), strings("pt_autograd_0")]
    strings("python3")  # real exports keep process names in StringIds too
    api_ids = np.array([strings(n) for n in W.API_NAMES], np.int64)
    kt_kernel = [k.memcpy is None for k in kinds]
    dem = np.array([strings(k.name) if kt_kernel[i] else -1 for i, k in enumerate(kinds)], np.int64)
    sho = np.array([strings(k.short) if kt_kernel[i] else -1 for i, k in enumerate(kinds)], np.int64)
    man = np.array(
        [strings(_mangle(k.name, k.short)) if kt_kernel[i] else -1 for i, k in enumerate(kinds)], np.int64
    )
    registered = {W.NCCL_TEXT: strings(W.NCCL_TEXT)}

    session = int(job.session_start[node])
    utc = int(job.utc_start[node])
    sess_row = {
        "utcEpochNs": utc,
        "utcTime": utc_text(utc),
        "localTime": utc_text(utc),
        "systemClockNs": 1_204_000_000_000 + node * 977_000_000 + session,
    }
    _insert_rows(con, "TARGET_INFO_SESSION_START_TIME", schema["TARGET_INFO_SESSION_START_TIME"], [sess_row])
    start_time = (
        sess_row["systemClockNs"] if "systemClockNs" in schema["TARGET_INFO_SESSION_START_TIME"] else 0
    )
    stop = end_time + 100_000_000 + (start_time if start_time else 0)
    _insert_rows(
        con,
        "ANALYSIS_DETAILS",
        schema["ANALYSIS_DETAILS"],
        [{"globalVid": VM, "duration": stop - start_time, "startTime": start_time, "stopTime": stop}],
    )
    _insert_rows(con, "TARGET_INFO_GPU", schema["TARGET_INFO_GPU"], _gpu_rows(job, ident))
    if "TARGET_INFO_CUDA_DEVICE" in schema:
        _insert_rows(
            con,
            "TARGET_INFO_CUDA_DEVICE",
            schema["TARGET_INFO_CUDA_DEVICE"],
            [
                {
                    "gpuId": ident["device_id"],
                    "cudaId": ident["device_id"],
                    "pid": ident["pid"],
                    "uuid": _gpu_rows(job, ident)[ident["device_id"]]["uuid"],
                    "numMultiprocessors": 132,
                }
            ],
        )
    env = [
        ("Hostname", ident["hostname"]),
        ("CpuCores", "224"),
        ("CpuArchitecture", "x86_64"),
        ("OsDescription", "Ubuntu 22.04.4 LTS"),
        ("NvDriverVersion", "570.124.06"),
        ("CudaDriverVersion", "12080"),
        ("DeviceEnvironment", env_text(job, ev.rank, ident)),
    ]
    _insert_rows(
        con,
        "TARGET_INFO_SYSTEM_ENV",
        schema["TARGET_INFO_SYSTEM_ENV"],
        [
            {"globalVid": VM, "devStateName": "Local (CLI)", "name": n, "nameEnum": i + 1, "value": val}
            for i, (n, val) in enumerate(env)
        ],
    )
    _insert_rows(
        con, "PROCESSES", schema["PROCESSES"], [{"globalPid": gpid, "pid": ident["pid"], "name": "python3"}]
    )
    _insert_rows(
        con,
        "ThreadNames",
        schema["ThreadNames"],
        [{"nameId": n, "priority": 20, "globalTid": int(t)} for n, t in zip(thread_names, gtid, strict=True)],
    )
    write_meta(con, job, ev, version, ident, schema)
    write_enums(con, v.launch_type_enum)

    # NVTX: push/pop rows carry literal text; NCCL's ranges use registered strings (textId)
    texts = job.nvtx_texts
    n = len(ev.nvtx_start)
    text_col = np.array([None if texts[t] in registered else texts[t] for t in ev.nvtx_text], dtype=object)
    text_id = np.array([registered.get(texts[t], -1) for t in ev.nvtx_text], np.int64)
    nv = {
        "start": ev.nvtx_start,
        "end": ev.nvtx_end,
        "eventType": ev.nvtx_type.astype(np.int64),
        "text": text_col,
        "globalTid": gtid[ev.nvtx_tid],
        "textId": text_id,
        "domainId": ev.nvtx_domain.astype(np.int64),
        "jsonText": ev.nvtx_payload,  # NCCL's JSON payload (nsys --include-json), None: none
    }
    if job.cfg.injections.memory_usage:  # nsys --cuda-memory-usage rows (synth/memory.py)
        _memory.write(con, job, ev, gpid, ident["device_id"])
    con.executemany(
        "INSERT INTO StringIds (id, value) VALUES (?, ?)", [(i, s) for s, i in strings.ids.items()]
    )
    con.commit()
    con.close()

    # bulk tables through DuckDB
    g_is_kernel = np.array(kt_kernel)[ev.gpu_ktype]
    kern = np.flatnonzero(g_is_kernel)
    cpy = np.flatnonzero(~g_is_kernel)
    stream_ids = np.array(W.STREAM_IDS, np.int64)
    kt = ev.gpu_ktype[kern]
    grid = np.array([k.grid for k in kinds], np.int64)
    block = np.array([k.block for k in kinds], np.int64)
    regs = np.array([k.regs for k in kinds], np.int64)
    ssmem = np.array([k.static_smem for k in kinds], np.int64)
    dsmem = np.array([k.dynamic_smem for k in kinds], np.int64)
    graph_node = ev.gpu_graph_node[kern]
    is_graph = graph_node >= 0
    nk = len(kern)
    kernel = {
        "start": ev.gpu_start[kern],
        "end": ev.gpu_end[kern],
        "deviceId": ident["device_id"],
        "contextId": 1,
        "greenContextId": 0,
        "streamId": stream_ids[ev.gpu_stream[kern]],
        "correlationId": ev.gpu_corr[kern],
        "globalPid": gpid,
        "demangledName": dem[kt],
        "shortName": sho[kt],
        "mangledName": man[kt],
        "launchType": 1,
        "cacheConfig": 1,
        "registersPerThread": regs[kt],
        "gridX": grid[kt, 0],
        "gridY": grid[kt, 1],
        "gridZ": grid[kt, 2],
        "blockX": block[kt, 0],
        "blockY": block[kt, 1],
        "blockZ": block[kt, 2],
        "staticSharedMemory": ssmem[kt],
        "dynamicSharedMemory": dsmem[kt],
        "localMemoryPerThread": 0,
        "localMemoryTotal": 155_713_536,
        "gridId": np.arange(1, nk + 1, dtype=np.int64) * 4 + 1000,
        "sharedMemoryExecuted": np.where(dsmem[kt] > 0, 233_472, 32_768).astype(np.int64),
        "graphNodeId": pa.array(graph_node, mask=~is_graph),
        "sharedMemoryLimitConfig": 0,
        "graphId": pa.array(np.where(is_graph, 1, 0).astype(np.int64), mask=~is_graph),
        "clusterX": 0,
        "clusterY": 0,
        "clusterZ": 0,
        "clusterSchedulingPolicy": 1,
        "maxPotentialClusterSize": 0,
        "maxActiveClusters": 0,
        "tensorSizeMinusOneElements": "[]",
    }
    ck = ev.gpu_ktype[cpy]
    copy = {
        "start": ev.gpu_start[cpy],
        "end": ev.gpu_end[cpy],
        "deviceId": ident["device_id"],
        "contextId": 1,
        "greenContextId": 0,
        "streamId": stream_ids[ev.gpu_stream[cpy]],
        "correlationId": ev.gpu_corr[cpy],
        "globalPid": gpid,
        "bytes": np.array([kinds[k].nbytes for k in ck], np.int64),
        "copyKind": np.array([COPY_KIND[kinds[k].memcpy] for k in ck], np.int64),
        "srcKind": np.array([kinds[k].src_kind for k in ck], np.int64),
        "dstKind": np.array([kinds[k].dst_kind for k in ck], np.int64),
        "copyCount": 1,
    }
    runtime = {
        "start": ev.api_start,
        "end": ev.api_end,
        "eventClass": 0,
        "globalTid": gtid[ev.api_tid],
        "correlationId": ev.api_corr,
        "nameId": api_ids[ev.api_name],
        "returnValue": 0,
    }
    empty: list[str] = []
    d.execute(f"ATTACH '{path}' AS t (TYPE sqlite)")
    d.execute("BEGIN")
    for table, data, rows in (
        ("CUPTI_ACTIVITY_KIND_KERNEL", kernel, nk),
        ("CUPTI_ACTIVITY_KIND_MEMCPY", copy, len(cpy)),
        ("CUPTI_ACTIVITY_KIND_RUNTIME", runtime, len(ev.api_start)),
        ("NVTX_EVENTS", nv, n),
    ):
        if rows == 0:
            empty.append(table)
            continue
        tbl = _arrow_cols(schema[table], data, rows)
        names = ", ".join(f'"{c}"' for c in tbl.column_names)
        d.register("src", tbl)
        d.execute(f'INSERT INTO t."{table}" ({names}) SELECT {names} FROM src')
        d.unregister("src")
    d.execute("COMMIT")
    d.execute("DETACH t")
    if vacuum or empty:
        con = sqlite3.connect(path)
        con.execute("PRAGMA synchronous = OFF")
        for table in empty:  # nsys exports lazily: a table without rows is not written at all
            con.execute(f'DROP TABLE "{table}"')
        con.commit()
        if vacuum:
            con.execute("VACUUM")
        con.close()


def _arrow_cols(cols: list[str], data: dict, n: int) -> pa.Table:
    out = {}
    for c in cols:
        if c not in data or data[c] is None:
            continue
        val = data[c]
        if isinstance(val, pa.Array):
            out[c] = val
        elif isinstance(val, np.ndarray):
            if val.dtype == object:
                out[c] = pa.array(list(val), type=pa.string())
            elif c == "textId":
                out[c] = pa.array(val, mask=val < 0)
            elif c == "end":
                out[c] = pa.array(val, mask=val < 0)
            else:
                out[c] = pa.array(val)
        elif isinstance(val, str):
            out[c] = pa.array([val] * n, type=pa.string())
        else:
            out[c] = pa.array(np.full(n, val, np.int64))
    return pa.table(out)
