"""NCCL's NVTX metadata from binary payloads (NVTX_EVENTS.binaryData, issue 52 "Modern stacks").

An nsys export without --include-json keeps NCCL's payloads only as blobs laid out by
NVTX_PAYLOAD_SCHEMAS / NVTX_PAYLOAD_SCHEMA_ENTRIES; sources/nvtx_binary.py decodes them (one SQL
statement, data/nvtx_binary_payload.sql) into the JSON text the --include-json export holds.
Expected values: the generator's ground truth (synth/parallel.py's operations), the same job's
--include-json export (synth/nccl_payload.write_binary turns its JSON into blobs for the same
events), and, for the real schema rows, values packed by hand. No shared capture holds a blob
(the nsys-ai exports have the schema tables, binaryData NULL): the blob header is the one
GindaChen/nsys-ai decodes from real `--include-blobs=true` exports.

The nsys loader decodes the blobs (nsys_loader's payload falls back to nvtx_binary's), and the
probe's NCCL rank hint decodes its few init records with the same statement (`decode_sql`'s
rowids); tests/test_nccl_binary_cli.py covers `synth --nccl-payload binary` and that hint.
"""

from __future__ import annotations

import shutil
import sqlite3
import struct
from pathlib import Path

import duckdb
import pytest
from conftest import TRACES, requires_shared

from nsight_analyze.ingest.run import ingest
from nsight_analyze.sources import nvtx_binary
from nsight_analyze.sources.nsys_meta import NsysMeta
from nsight_analyze.store.duck import attach_sqlite
from nsight_analyze.synth import generate
from nsight_analyze.synth.nccl_payload import ENTRIES_DDL, SCHEMAS_DDL, write_binary

JOB = {"ranks": 4, "gpus_per_node": 2, "steps": 2, "parallel": "tp=2,pp=2,dp=1"}
META = NsysMeta(tables={"NVTX_EVENTS": ["binaryData"], "NVTX_PAYLOAD_SCHEMA_ENTRIES": []})
# one merge row, the communicator spelled as a number: the advanced trace's JSON writes commHash as
# a hex string ("0x5eed0000"), its blob as a u64 (the generator's choice; no capture says how nsys
# spells it), and a communicator only has to be spelled alike on every rank of one export
MERGE = """SELECT rank, correlation_id, op,
                  CASE WHEN comm LIKE '0x%' THEN CAST(comm::UBIGINT AS VARCHAR) ELSE comm END AS comm,
                  seq, bytes, key_source, peer, comm_size
           FROM merge_nccl_kernels ORDER BY rank, correlation_id"""


def _ingest_read(folder, db) -> tuple[list, list, int]:
    ingest([folder], str(db), analyze=["merge_nccl_kernels", "merge_coll_members"])
    con = duckdb.connect(str(db), read_only=True)
    try:
        merge = con.execute(MERGE).fetchall()
        members = con.execute("SELECT rank, correlation_id, op, comm, seq FROM merge_coll_members").fetchall()
        payloads = con.execute("SELECT count(*) FROM nvtx WHERE payload IS NOT NULL").fetchone()[0]
    finally:
        con.close()
    return merge, members, payloads


def _groups(rows) -> set[frozenset]:
    out: dict[tuple, set] = {}
    for rank, corr, *key in rows:
        out.setdefault(tuple(key), set()).add((rank, corr))
    return {frozenset(v) for v in out.values()}


@pytest.mark.parametrize("advanced", [False, True], ids=["legacy", "advanced"])
def test_binary_export_gives_the_json_exports_collectives(tmp_path, advanced):
    """The same job exported both ways: every NCCL kernel gets the same key, bytes, peer and
    communicator size, and the instances are the truth's (with apiId: every operation; legacy:
    the all-reduces by communicator and payload order, send/recv by peer)."""
    truth = generate(tmp_path / "json", nccl_trace=advanced, **JOB)
    shutil.copytree(tmp_path / "json", tmp_path / "bin")
    files = sorted((tmp_path / "bin").glob("*.sqlite"))
    rewritten = [write_binary(f) for f in files]
    assert len(files) == 4 and all(rewritten)
    for f in files:  # the binary export holds no JSON any more
        with sqlite3.connect(f) as con:
            assert con.execute("SELECT count(*) FROM NVTX_EVENTS WHERE jsonText IS NOT NULL").fetchone() == (
                0,
            )
    json_merge, json_members, json_payloads = _ingest_read(tmp_path / "json", tmp_path / "json.duckdb")
    bin_merge, bin_members, bin_payloads = _ingest_read(tmp_path / "bin", tmp_path / "bin.duckdb")
    assert bin_payloads == json_payloads == sum(rewritten)
    assert bin_merge == json_merge
    assert _groups(bin_members) == _groups(json_members)
    truth_ops = truth["parallel"]["operations"]
    assert _groups(bin_members) == {frozenset((r, c) for r, c in o["members"]) for o in truth_ops}
    sources = {row[6] for row in bin_merge}
    assert sources == ({"nccl-api-id", "nvtx-payload"} if advanced else {"nvtx-payload"})


def _real_schema_db(tmp_path, blobs: list[bytes | str]):
    """An export holding the real capture's NCCL schema rows (nsys 2026.2.1, NCCL 2.2x) and the
    given blobs in a binaryData column declared TEXT, as the real NVTX_EVENTS declares it."""
    real = TRACES / "nsys" / "nsys-ai" / "mfu_2gpu_before.sqlite"
    with sqlite3.connect(real) as src:
        schemas = src.execute("SELECT DISTINCT * FROM NVTX_PAYLOAD_SCHEMAS").fetchall()
        entries = src.execute("SELECT DISTINCT * FROM NVTX_PAYLOAD_SCHEMA_ENTRIES").fetchall()
    path = tmp_path / "real_schemas.sqlite"
    with sqlite3.connect(path) as con:
        con.execute(SCHEMAS_DDL)
        con.execute(ENTRIES_DDL)
        con.execute("CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, jsonText TEXT, binaryData TEXT)")
        con.executemany("INSERT INTO NVTX_PAYLOAD_SCHEMAS VALUES (?, ?, ?, ?, ?, ?, ?, ?)", schemas)
        con.executemany("INSERT INTO NVTX_PAYLOAD_SCHEMA_ENTRIES VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", entries)
        con.executemany(
            "INSERT INTO NVTX_EVENTS (start, binaryData) VALUES (?, ?)",
            [(i, sqlite3.Binary(b) if isinstance(b, bytes) else b) for i, b in enumerate(blobs)],
        )
    return path


def _decode(path) -> tuple[list[str | None], int]:
    """Decoded payload per NVTX_EVENTS row (rowid order) and the undecoded count; the loader's join
    and the bare SELECT agree."""
    con = duckdb.connect()
    try:
        attach_sqlite(con, path, "src")
        got = dict(con.execute(nvtx_binary.decode_sql("src")).fetchall())
        n = con.execute("SELECT count(*) FROM src.NVTX_EVENTS").fetchone()[0]
        expr, join = nvtx_binary.payload_join("src", META)
        joined = con.execute(f"SELECT {expr} FROM src.NVTX_EVENTS x{join} ORDER BY x.rowid").fetchall()
        rows = [got.get(rid) for rid in range(1, n + 1)]
        assert [r for (r,) in joined] == rows
        return rows, nvtx_binary.undecoded(con, "src", META)
    finally:
        con.close()


@requires_shared
def test_real_schema_rows_decode(tmp_path):
    """Blobs packed by hand (header + C struct, little-endian) against the schema rows of the real
    capture: first offsets NULL, u64 communicator (type 18), size_t (22), int (5), the reduction op
    as a registered enum type (16777232); a negative int; a blob stored as hex text; a blob whose
    schema is not listed is counted, not decoded."""

    def header(schema: int, payload: bytes) -> bytes:
        return struct.pack("<4Q", 1, schema, len(payload), 32) + payload

    allreduce = header(16777223, struct.pack("<QQi4x", 0xFEDCBA9876543210, 1 << 20, 2))
    send = header(16777225, struct.pack("<QQi4x", 42, 4096, -1))
    init = header(16777218, struct.pack("<Qiii4x", 7, 8, 3, 1))
    unknown = header(16777299, struct.pack("<Q", 1))
    path = _real_schema_db(tmp_path, [allreduce, send, init.hex(), unknown])
    got, undecoded = _decode(path)
    assert got == [
        '{"NCCL communicator ID": 18364758544493064720, "Message size [bytes]": 1048576, '
        '"Reduction operation": 2}',
        '{"NCCL communicator ID": 42, "Message size [bytes]": 4096, "Peer rank": -1}',
        '{"NCCL communicator ID": 7, "No. of ranks": 8, "Rank": 3, "CUDA device": 1}',
        None,
    ]
    assert undecoded == 1


@requires_shared
def test_truncated_blob_is_not_decoded(tmp_path):
    """A header whose payload runs past the blob's end decodes nothing (counted, never read from
    beyond the blob)."""
    short = struct.pack("<4Q", 1, 16777220, 16, 32) + b"\x01" * 8
    got, undecoded = _decode(_real_schema_db(tmp_path, [short]))
    assert got == [None] and undecoded == 1


def _hand_schema_db(path: Path, schema: int, entries: list, payloads: list[bytes]) -> Path:
    """An export holding one hand-laid payload schema (entries: (name, NVTX type, offset as the
    schema lists it)) and one NVTX event per payload, each blob the schema's header + payload."""
    with sqlite3.connect(path) as con:
        con.execute(SCHEMAS_DDL)
        con.execute(ENTRIES_DDL)
        con.execute("CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, jsonText TEXT, binaryData TEXT)")
        con.execute(
            "INSERT INTO NVTX_PAYLOAD_SCHEMAS VALUES (?, 4294967296, NULL, 1, NULL, ?, ?, NULL)",
            (schema, len(entries), len(payloads[0])),
        )
        con.executemany(
            "INSERT INTO NVTX_PAYLOAD_SCHEMA_ENTRIES VALUES (?, 4294967296, ?, NULL, ?, ?, NULL, NULL, ?)",
            [(schema, i, t, n, off) for i, (n, t, off) in enumerate(entries)],
        )
        for payload in payloads:
            blob = struct.pack("<4Q", schema, 4294967296, len(payload), 32) + payload
            con.execute("INSERT INTO NVTX_EVENTS (start, binaryData) VALUES (0, ?)", (sqlite3.Binary(blob),))
    return path


def test_offsets_without_values_follow_c_alignment(tmp_path):
    """Entries without an offset are placed as a C compiler places struct members (hand-laid
    struct below); a double is not decoded (null) but still moves the next entry; after a string
    (unknown size) an entry without an offset is not placed (null), never guessed; an unsigned u64
    above 2^63 stays positive."""
    entries = [  # (name, NVTX type, offset as the schema lists it)
        ("a", 12, None),  # uint8 at 0
        ("b", 5, None),  # int at 4
        ("c", 20, None),  # double at 8
        ("d", 18, None),  # uint64 at 16
        ("e", 75, 24),  # C string, 8 bytes here
        ("f", 5, None),  # int: after a string, unknown
    ]
    payload = (
        struct.pack("<B3xid", 7, -5, 1.5)
        + struct.pack("<Q", (1 << 63) + 1)
        + b"abcdefg\0"
        + struct.pack("<i", 9)
    )
    got, undecoded = _decode(_hand_schema_db(tmp_path / "hand.sqlite", 3, entries, [payload]))
    assert got == ['{"a": 7, "b": -5, "c": null, "d": 9223372036854775809, "e": null, "f": null}']
    assert undecoded == 0


def test_decoding_some_rows_gives_those_rows_of_the_whole_decode(tmp_path):
    """`decode_sql(alias, rowids)` (the probe's bounded read) decodes exactly the rows asked for,
    each as the whole statement decodes it; no rowid decodes nothing. Two blobs of one hand-laid
    schema (two u64 entries)."""
    entries = [("x", 18, None), ("y", 18, 8)]  # u64 at 0 (no offset: natural) and at 8
    payloads = [struct.pack("<QQ", x, y) for x, y in ((1, 2), (3, 4), (5, 6))]
    path = _hand_schema_db(tmp_path / "two.sqlite", 1, entries, payloads)
    con = duckdb.connect()
    try:
        attach_sqlite(con, path, "src")
        whole = dict(con.execute(nvtx_binary.decode_sql("src")).fetchall())
        some = dict(con.execute(nvtx_binary.decode_sql("src", [3, 1])).fetchall())
        none = con.execute(nvtx_binary.decode_sql("src", [])).fetchall()
    finally:
        con.close()
    assert whole == {1: '{"x": 1, "y": 2}', 2: '{"x": 3, "y": 4}', 3: '{"x": 5, "y": 6}'}
    assert some == {r: whole[r] for r in (1, 3)} and none == []
