"""NCCL's NVTX payloads as binary blobs with their schemas: the export without --include-json.

Why: a real nsys export keeps NCCL's NVTX metadata either as JSON (`nsys export --include-json
true`: NVTX_EVENTS.jsonText) or as binary payloads (NVTX_EVENTS.binaryData, laid out by
NVTX_PAYLOAD_SCHEMAS / NVTX_PAYLOAD_SCHEMA_ENTRIES). `write_binary` rewrites a generated rank
file from the first form into the second for the same events, so a test can check that both
exports give the same answers (sources/nvtx_binary.py decodes the second).

Layout written (what a real capture has confirmed and what it has not):
  * the schema tables' columns (names, types, NOT NULL) and the legacy NCCL schemas (entry names,
    types, offsets, the first entry's offset NULL, payloadSize) are those of the shared real
    export nsys/nsys-ai/mfu_2gpu_before.sqlite (nsys 2026.2.1, schema rows only); its schema ids
    too, but which id belongs to which range name (the export does not say) is the generator's
    reading of NCCL's NVTX_SID_* order;
  * the blob = 32-byte little-endian header [domainId][schemaId][payloadSize][payloadOffset = 32]
    then the payload (GindaChen/nsys-ai nccl_communicator.py, from real --include-blobs=true
    exports; no shared capture holds a blob), stored as a BLOB in the column declared TEXT;
  * the advanced NCCL trace's schemas are not known at all: one dynamic schema (ids from 1 << 32)
    per range name and key list of the JSON the generator writes, entries in the JSON's order,
    ids and sizes as u64/size_t, ranks as int, the data type as a 4-byte enum.
String values (the reduction op, the data type) become their NCCL enum numbers; keys of the
generator's JSON that NCCL's real schemas do not have ("Data type" on legacy ranges) are left out,
as a real binary export would not have them; "CUDA device", which the real schema has and the
generator's JSON not, is the rank's device.
"""

from __future__ import annotations

import json
import sqlite3
import struct
from collections.abc import Iterable
from pathlib import Path

from ..errors import UserError

STATIC = 1 << 24  # NVTX_PAYLOAD_ENTRY_TYPE_SCHEMA_ID_STATIC_START
DYNAMIC = 1 << 32  # NVTX_PAYLOAD_ENTRY_TYPE_SCHEMA_ID_DYNAMIC_START
HEADER = 32
INT, UINT64, SIZE = 5, 18, 22  # NVTX_PAYLOAD_ENTRY_TYPE_*
REDOP_ENUM = STATIC + 16  # the reduction-op entry type in the real export
DTYPE_ENUM = DYNAMIC + 999  # the generator's own id for a data-type enum (no real source)
SIZES = {INT: 4, UINT64: 8, SIZE: 8, REDOP_ENUM: 4, DTYPE_ENUM: 4}
FORMATS = {INT: "<i", UINT64: "<Q", SIZE: "<Q", REDOP_ENUM: "<i", DTYPE_ENUM: "<i"}
NCCL_ENUMS = {"ncclSum": 0, "ncclProd": 1, "ncclMax": 2, "ncclMin": 3, "ncclAvg": 4, "ncclBfloat16": 9}

# legacy ranges: NCCL's own schemas as the real export lists them (schemaId, [(name, type)])
COMM, NRANKS, RANK, DEV = "NCCL communicator ID", "No. of ranks", "Rank", "CUDA device"
MSG, PEER, REDOP = "Message size [bytes]", "Peer rank", "Reduction operation"
LEGACY = {
    "ncclCommInitRank": (STATIC + 2, [(COMM, UINT64), (NRANKS, INT), (RANK, INT), (DEV, INT)]),
    "ncclAllReduce": (STATIC + 7, [(COMM, UINT64), (MSG, SIZE), (REDOP, REDOP_ENUM)]),
    "ncclAllGather": (STATIC + 4, [(COMM, UINT64), (MSG, SIZE)]),
    "ncclSend": (STATIC + 9, [(COMM, UINT64), (MSG, SIZE), (PEER, INT)]),
    "ncclRecv": (STATIC + 10, [(COMM, UINT64), (MSG, SIZE), (PEER, INT)]),
}
ADVANCED_TYPES = {
    "rank": INT,
    "nRanks": INT,
    "peer": INT,
    "count": SIZE,
    "msgSize": SIZE,
    "datatype": DTYPE_ENUM,
}

SCHEMAS_DDL = """CREATE TABLE NVTX_PAYLOAD_SCHEMAS (
    domainId INTEGER, schemaId INTEGER, name TEXT, type INTEGER, flags INTEGER, numEntries INTEGER,
    payloadSize INTEGER, alignTo INTEGER)"""
ENTRIES_DDL = """CREATE TABLE NVTX_PAYLOAD_SCHEMA_ENTRIES (
    domainId INTEGER NOT NULL, schemaId INTEGER NOT NULL, idx INTEGER NOT NULL, flags INTEGER,
    type INTEGER, name TEXT, description TEXT, arrayOrUnionDetail INTEGER, offset INTEGER)"""


def layout(entries: list[tuple[str, int]]) -> tuple[list[int], int]:
    """C struct layout: each entry at its own size's alignment; the size rounded to the largest."""
    offsets, end = [], 0
    for _, t in entries:
        size = SIZES[t]
        end = (end + size - 1) // size * size
        offsets.append(end)
        end += size
    align = max(SIZES[t] for _, t in entries)
    return offsets, (end + align - 1) // align * align


def _value(v: object) -> int:
    if isinstance(v, str):
        return int(v, 16) if v.startswith("0x") else NCCL_ENUMS[v]
    return int(v)  # type: ignore[arg-type]


def blob(domain: int, schema: int, entries: list[tuple[str, int]], values: dict) -> bytes:
    """Header and payload of one event."""
    offsets, size = layout(entries)
    payload = bytearray(size)
    for (name, t), off in zip(entries, offsets, strict=True):
        struct.pack_into(FORMATS[t], payload, off, _value(values[name]))
    return struct.pack("<4Q", domain, schema, size, HEADER) + bytes(payload)


def write_binary(path: str | Path) -> int:
    """Move every JSON payload of the rank file at `path` into binaryData with its schema (jsonText
    NULL after); return the number of events rewritten."""
    con = sqlite3.connect(str(path))
    try:
        if "binaryData" not in {c[1] for c in con.execute("PRAGMA table_info(NVTX_EVENTS)")}:
            raise UserError(
                f"{path}: its NVTX_EVENTS has no binaryData column (nsys 2024.6+ schemas have it)"
            )
        rows = con.execute(
            """SELECT e.rowid, e.domainId, COALESCE(e.text, s.value), e.jsonText FROM NVTX_EVENTS e
               LEFT JOIN StringIds s ON s.id = e.textId WHERE e.jsonText IS NOT NULL ORDER BY e.rowid"""
        ).fetchall()
        dev = con.execute("SELECT MIN(deviceId) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0] or 0
        schemas: dict[tuple[int, int], list[tuple[str, int]]] = {}
        dynamic: dict[tuple, int] = {}
        updates = []
        for rowid, domain, name, text in rows:
            values = json.loads(text)
            if name in LEGACY:
                schema, entries = LEGACY[name]
                values.setdefault(DEV, dev)
            else:
                entries = [(k, ADVANCED_TYPES.get(k, UINT64)) for k in values]
                schema = dynamic.setdefault((name, tuple(entries)), DYNAMIC + len(dynamic))
            schemas[(domain, schema)] = entries
            updates.append((sqlite3.Binary(blob(domain, schema, entries, values)), rowid))
        con.executemany("UPDATE NVTX_EVENTS SET binaryData = ?, jsonText = NULL WHERE rowid = ?", updates)
        con.execute(SCHEMAS_DDL)
        con.execute(ENTRIES_DDL)
        for (domain, schema), entries in sorted(schemas.items()):
            offsets, size = layout(entries)
            con.execute(
                "INSERT INTO NVTX_PAYLOAD_SCHEMAS VALUES (?, ?, NULL, 1, NULL, ?, ?, NULL)",
                (domain, schema, len(entries), size),
            )
            con.executemany(
                "INSERT INTO NVTX_PAYLOAD_SCHEMA_ENTRIES VALUES (?, ?, ?, NULL, ?, ?, NULL, NULL, ?)",
                [
                    (domain, schema, i, t, n, off if i else None)  # the real export: first offset NULL
                    for i, ((n, t), off) in enumerate(zip(entries, offsets, strict=True))
                ],
            )
        con.commit()
        return len(updates)
    finally:
        con.close()


def binary_schemas() -> list[str]:
    """The generator's schema versions whose NVTX_EVENTS has the binaryData column write_binary
    fills (older nsys exports cannot hold a binary payload)."""
    from .schemas import VERSIONS, columns

    return [v for v in VERSIONS if "binaryData" in columns(v)["NVTX_EVENTS"]]


def write_binary_job(out_dir: str | Path, files: Iterable[str], truth_file: str | None) -> int:
    """`synth --nccl-payload binary`: rewrite every rank file of a generated job (write_binary) and,
    when the job has a ground truth, record the form beside the generator's other NCCL choices
    (`generator.nccl_payload`: "binary", `generator.nccl_payload_events`: the events rewritten, the
    nvtx rows with a payload an ingest should decode); return that count. Why a rewrite after the
    fact: the binary export holds the same events as the JSON one, only their payloads' form differs."""
    out = Path(out_dir)
    total = sum(write_binary(out / name) for name in files)
    if truth_file is not None:
        path = out / truth_file
        doc = json.loads(path.read_text())
        doc["generator"]["nccl_payload"] = "binary"
        doc["generator"]["nccl_payload_events"] = total
        path.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    return total
