"""NVTX binary payloads of an nsys export (NVTX_EVENTS.binaryData), decoded to the JSON text the
--include-json export writes.

Why: NCCL's NVTX metadata (communicator, message size, peer; with the advanced NCCL trace its
apiId and seqNumber) is what matches a collective across ranks. An export without
--include-json carries it only as binary payloads laid out by NVTX_PAYLOAD_SCHEMAS /
NVTX_PAYLOAD_SCHEMA_ENTRIES. Decoding them into the same JSON object lets the nvtx table's
`payload` column, and every query reading it, stay as they are. The decoding is one SQL statement
over all events (data/nvtx_binary_payload.sql: layout, sources and what is not decoded); this
module runs it on the attached export and hands the loader an expression for its payload column.

Used by the loader's load_nvtx (nsys_loader.Loader): the payload is `COALESCE(<jsonTextId's
string>, x.jsonText, <decoded blob>)`; `undecoded(con, alias, meta)` rows go to LoadResult.skipped.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

import duckdb

from ..store.query_layer import statements


class HasTables(Protocol):
    """What the decoder needs of an export's census (nsys_meta.NsysMeta): which tables and columns
    it has. A protocol, not an import: nsys_meta's probe calls this module."""

    def has(self, table: str, column: str | None = None) -> bool: ...


SQL = statements("sources/nvtx_binary")
DECODER = Path(__file__).resolve().parents[1] / "data" / "nvtx_binary_payload.sql"

# the blobs' row filter inside the statement's SQLite query, which `rowids` narrows
BLOB_ROWS = SQL["blob_rows"]


def decode_sql(alias: str, rowids: Iterable[int] | None = None) -> str:
    """The decoding SELECT (rid, payload) on the export attached as `alias`; with `rowids`, of
    those NVTX_EVENTS rows only. Why the filter: a probe (nsys_meta's NCCL rank hint) decodes a
    few known rows with the same layout logic, without reading every blob of the export."""
    if not alias.replace("_", "").isalnum():
        raise ValueError(f"not an attachment alias: {alias!r}")
    sql = DECODER.read_text()
    if rowids is not None:
        ids = ", ".join(str(int(r)) for r in rowids) or "NULL"
        if sql.count(BLOB_ROWS) != 1:
            raise RuntimeError(f"{DECODER.name} no longer selects its blobs with {BLOB_ROWS!r}")
        sql = sql.replace(BLOB_ROWS, SQL.sql("blob_rows_of", blob_rows=BLOB_ROWS, ids=ids))
    return sql.replace("@SRC@", alias)


def has_binary_payloads(meta: HasTables) -> bool:
    """True when the export can hold decodable binary payloads (the column and the schema entries)."""
    return meta.has("NVTX_EVENTS", "binaryData") and meta.has("NVTX_PAYLOAD_SCHEMA_ENTRIES")


def payload_join(alias: str, meta: HasTables, row: str = "x") -> tuple[str, str]:
    """(select expression, join clause) adding the decoded payload to NVTX_EVENTS row `row`, in the
    loader's `string()` form; ("NULL", "") when the export has no binary payloads. The join's build
    side is the decoded blobs: one pass over the events, however many."""
    if not has_binary_payloads(meta):
        return "NULL", ""
    return "nvtx_bin.payload", " " + SQL.sql("payload_join", decoded=decode_sql(alias), row=row)


def undecoded(con: duckdb.DuckDBPyConnection, alias: str, meta: HasTables) -> int:
    """Rows with a binary payload that no schema decodes (missing schema rows, a header that does
    not fit the blob), for the loader's skipped list: never dropped in silence."""
    if not meta.has("NVTX_EVENTS", "binaryData"):
        return 0
    total = con.execute(SQL.sql("binary_payload_count", alias=alias)).fetchone()[0]
    if not total or not has_binary_payloads(meta):
        return int(total)
    done = con.execute(SQL.sql("decoded_count", decoded=decode_sql(alias))).fetchone()[0]
    return int(total) - int(done)
