"""The small fixed tables of a generated nsys export: the ENUM_* tables, the export and capture
metadata (META_DATA_EXPORT / META_DATA_CAPTURE, by schema version) and the environment text they
and TARGET_INFO_SYSTEM_ENV quote.

Why a module of its own: these rows are what Nsight Systems writes around the events, the same for
every rank but for its host and clocks, and what the readers' probes (sources/nsys_meta.py) and
enum maps check; writer.py writes the events themselves.
"""

from __future__ import annotations

import datetime as dt
import sqlite3

from .job import Job, RankEvents
from .schemas import VERSIONS

MEM_KIND = ["PAGEABLE", "PINNED", "DEVICE", "ARRAY", "MANAGED", "DEVICE_STATIC", "MANAGED_STATIC", "UNKNOWN"]
MEM_KIND_LABEL = [
    "Pageable",
    "Pinned",
    "Device",
    "Array",
    "Managed",
    "Device Static",
    "Managed Static",
    "Unknown",
]
MEMCPY_OPER = [
    ("UNKNOWN", "Unknown"),
    ("HTOD", "Host-to-Device"),
    ("DTOH", "Device-to-Host"),
    ("HTOA", "Host-to-Array"),
    ("ATOH", "Array-to-Host"),
    ("ATOA", "Array-to-Array"),
    ("ATOD", "Array-to-Device"),
    ("DTOA", "Device-to-Array"),
    ("DTOD", "Device-to-Device"),
    ("HTOH", "Host-to-Host"),
    ("PTOP", "Peer-to-Peer"),
    ("UVM_HTOD", "Unified Host-to-Device"),
    ("UVM_DTOH", "Unified Device-to-Host"),
    ("UVM_DTOD", "Unified Device-to-Device"),
]


EVENT_TYPES = [
    (33, "NvtxCategory"),
    (34, "NvtxMark"),
    (35, "NvtxPushRange"),
    (36, "NvtxPopRange"),
    (37, "NvtxStartRange"),
    (38, "NvtxEndRange"),
    (39, "NvtxThread"),
    (48, "TraceFunctions"),
    (59, "NvtxPushPopRange"),
    (60, "NvtxStartEndRange"),
    (70, "NvtxtPushPopRange"),
    (71, "NvtxtStartEndRange"),
    (75, "NvtxDomainCreate"),
    (76, "NvtxDomainDestroy"),
]
EVENT_CLASSES = [
    (0, "TRACE_PROCESS_EVENT_CUDA_RUNTIME", "CUDA runtime"),
    (1, "TRACE_PROCESS_EVENT_CUDA_DRIVER", "CUDA driver"),
    (13, "TRACE_PROCESS_EVENT_CUDA_EGL_DRIVER", "CUDA EGL driver"),
    (27, "TRACE_PROCESS_EVENT_OS_RUNTIME", "OSRT runtime"),
    (77, "TRACE_PROCESS_EVENT_CUDA_GRAPH_NODE_CREATION", "CUDA graph node creation"),
    (94, "TRACE_PROCESS_EVENT_CUDA_GRAPHEXEC_CREATION", "CUDA graph exec creation"),
    (95, "TRACE_PROCESS_EVENT_CUDA_GRAPH_CREATION", "CUDA graph creation"),
    (96, "TRACE_PROCESS_EVENT_CUDA_GRAPH_CLONE", "CUDA graph clone"),
]
LAUNCH_TYPES = [
    (0, "UNKNOWN", "Unknown"),
    (1, "REGULAR", "Regular"),
    (2, "COOPERATIVE_SINGLE_DEVICE", "Coop Single Device"),
    (3, "COOPERATIVE_MULTI_DEVICE", "Coop Multi Device"),
]


def utc_text(ns: int) -> str:
    """A UTC time as the export's text columns write it (whole seconds, no zone)."""
    return dt.datetime.fromtimestamp(ns // 1_000_000_000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def env_text(job: Job, rank: int, ident: dict) -> str:
    """The rank's environment as one `NAME=value;...` text (TARGET_INFO_SYSTEM_ENV's
    DeviceEnvironment, and the capture metadata's variables)."""
    cfg = job.cfg
    pairs = [
        ("SHELL", "/bin/bash"),
        ("HOSTNAME", ident["hostname"]),
        ("HOME", "/home/trainer"),
        ("PATH", "/usr/local/cuda/bin:/usr/local/bin:/usr/bin:/bin"),
        ("LS_COLORS", "rs=0:di=01;34:ln=01;36:mh=00:pi=40;33"),
        ("CUDA_DEVICE_MAX_CONNECTIONS", "1"),
        ("NCCL_DEBUG", "WARN"),
        ("NCCL_IB_HCA", "mlx5"),
        ("OMP_NUM_THREADS", "8"),
        ("MASTER_ADDR", "h100-node00"),
        ("MASTER_PORT", "29500"),
        ("TORCHELASTIC_RUN_ID", "synthetic-job"),
        ("GROUP_RANK", str(ident["node"])),
        ("LOCAL_WORLD_SIZE", str(cfg.gpus_per_node)),
        ("WORLD_SIZE", str(cfg.ranks)),
        ("LOCAL_RANK", str(ident["local_rank"])),
        ("RANK", str(rank)),
    ]
    return ";".join(f"{k}={v}" for k, v in pairs)


def write_meta(
    con: sqlite3.Connection, job: Job, ev: RankEvents, version: str, ident: dict, schema: dict
) -> None:
    """The export metadata rows of the schema version (META_DATA_EXPORT, EXPORT_META_DATA in 2022.x)
    and, where the version has it, META_DATA_CAPTURE."""
    v = VERSIONS[version]
    major, minor, micro = v.schema_version.split(".")
    utc = int(job.utc_start[ident["node"]]) + 180_000_000_000
    stem = ident["file"].rsplit(".", 1)[0]
    rows = [
        ("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"),
        ("EXPORT_PRODUCT_VERSION", v.product_version),
        ("EXPORT_PRODUCT_DATE", v.key),
        ("EXPORT_SCHEMA_VERSION", v.schema_version),
        ("EXPORT_SCHEMA_VERSION_MAJOR", major),
        ("EXPORT_SCHEMA_VERSION_MINOR", minor),
        ("EXPORT_SCHEMA_VERSION_MICRO", micro),
        ("EXPORT_PLATFORM", "linux-desktop"),
        ("EXPORT_ARCH", "x64"),
        ("EXPORT_TIME_UTC", utc_text(utc)),
        ("EXPORT_TIME_LOCAL", utc_text(utc) + " +0000 UTC"),
        ("EXPORT_HOST", ident["hostname"]),
        ("EXPORT_USER", ""),
    ]
    if v.newer_than_2022:
        p = "EXPORT_PARAM_"
        rows += [
            (p + "INPUT_FILE", f"{stem}.nsys-rep"),
            (p + "OUTPUT_FILE", f"{stem}.sqlite"),
            (p + "INPUT_PATH", f"/scratch/job/{stem}.nsys-rep"),
            (p + "OUTPUT_PATH", f"/scratch/job/{stem}.sqlite"),
            (p + "INPUT_PATH_ABS", f"/scratch/job/{stem}.nsys-rep"),
            (p + "OUTPUT_PATH_ABS", f"/scratch/job/{stem}.sqlite"),
            (p + "OVERWRITE", "true"),
            (p + "APPEND", "false"),
            (p + "LAZY", "true"),
            (p + "TIME_NORMALIZE", "false"),
            (p + "TIME_SHIFT", "0"),
            (p + "TABLES_TO_EXPORT", ""),
            (p + "TIMES_TO_EXPORT", ""),
            ("EXPORT_CONFIG_TIME_SHIFT", "0"),
            ("EXPORT_TIME", "1.02 sec"),
        ]
    else:
        rows += [
            ("EXPORT_INPUT_FILE", f"{stem}.nsys-rep"),
            ("EXPORT_OUTUPT_FILE", f"{stem}.sqlite"),
            ("EXPORT_INPUT_PATH", f"{stem}.nsys-rep"),
            ("EXPORT_OUTUPT_PATH", f"{stem}.sqlite"),
            ("EXPORT_INPUT_PATH_ABS", f"/scratch/job/{stem}.nsys-rep"),
            ("EXPORT_OUTUPT_PATH_ABS", f"/scratch/job/{stem}.sqlite"),
            ("EXPORT_OVERWRITE", "false"),
            ("EXPORT_LAZY", "true"),
            ("EXPORT_TIME", "1.02"),
        ]
    con.executemany(f'INSERT INTO "{v.meta_table}" (name, value) VALUES (?, ?)', rows)
    if v.has_capture_meta:
        env = env_text(job, ev.rank, ident).split(";")
        cap = [
            ("DEVICE_ID", "Local (CLI)"),
            ("CAPTURE_EVENT_TYPE", "NvtxEvents"),
            ("CAPTURE_EVENT_TYPE", "Cuda"),
            ("PROCESS_0:COMMAND", "python3"),
            ("PROCESS_0:ARGUMENT_0", "train.py"),
            ("PROCESS_0:ARGUMENT_1", "--steps"),
            ("PROCESS_0:ARGUMENT_2", str(job.cfg.steps)),
            ("PROCESS_0:WORKING_DIR", "/scratch/job"),
            ("PROCESS_0:PID", "0"),
            ("PROCESS_0:CUDA_GRAPH_TRACE_OPTIONS:MODE", "Node" if job.cfg.injections.cuda_graph else "Graph"),
        ]
        cap += [
            ("PROCESS_0:ENVIRONMENT_VARIABLE", '{}="{}"'.format(*e.split("=", 1))) for e in env if "=" in e
        ]
        con.executemany("INSERT INTO META_DATA_CAPTURE (name, value) VALUES (?, ?)", cap)


def write_enums(con: sqlite3.Connection, launch_enum: str) -> None:
    """The ENUM_* tables the readers map ids through (memcpy kinds, memory kinds, event types and
    classes, launch types; `launch_enum` is the version's name for the last)."""
    con.executemany(
        "INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (?, ?, ?)",
        [(i, f"CUDA_MEMCPY_KIND_{n}", lab) for i, (n, lab) in enumerate(MEMCPY_OPER)],
    )
    con.executemany(
        "INSERT INTO ENUM_CUDA_MEM_KIND VALUES (?, ?, ?)",
        [
            (i, f"CUDA_MEMOPR_MEMORY_KIND_{n}", lab)
            for i, (n, lab) in enumerate(zip(MEM_KIND, MEM_KIND_LABEL, strict=False))
        ],
    )
    con.executemany("INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (?, ?, ?)", [(i, n, n) for i, n in EVENT_TYPES])
    con.executemany("INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (?, ?, ?)", EVENT_CLASSES)
    con.executemany(
        f"INSERT INTO {launch_enum} VALUES (?, ?, ?)",
        [(i, f"CUDA_KERNEL_LAUNCH_TYPE_{n}", lab) for i, n, lab in LAUNCH_TYPES],
    )
