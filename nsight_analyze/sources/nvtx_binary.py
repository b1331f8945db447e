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

from pathlib import Path

import duckdb

from .nsys_meta import NsysMeta

SQL = Path(__file__).resolve().parents[1] / "data" / "nvtx_binary_payload.sql"


def decode_sql(alias: str) -> str:
    """The decoding SELECT (rid, payload) on the export attached as `alias`."""
    if not alias.replace("_", "").isalnum():
        raise ValueError(f"not an attachment alias: {alias!r}")
    return SQL.read_text().replace("@SRC@", alias)


def has_binary_payloads(meta: NsysMeta) -> bool:
    """True when the export can hold decodable binary payloads (the column and the schema entries)."""
    return meta.has("NVTX_EVENTS", "binaryData") and meta.has("NVTX_PAYLOAD_SCHEMA_ENTRIES")


def payload_join(alias: str, meta: NsysMeta, row: str = "x") -> tuple[str, str]:
    """(select expression, join clause) adding the decoded payload to NVTX_EVENTS row `row`, in the
    loader's `string()` form; ("NULL", "") when the export has no binary payloads. The join's build
    side is the decoded blobs: one pass over the events, however many."""
    if not has_binary_payloads(meta):
        return "NULL", ""
    return "nvtx_bin.payload", f" LEFT JOIN ({decode_sql(alias)}) AS nvtx_bin ON nvtx_bin.rid = {row}.rowid"


def undecoded(con: duckdb.DuckDBPyConnection, alias: str, meta: NsysMeta) -> int:
    """Rows with a binary payload that no schema decodes (missing schema rows, a header that does
    not fit the blob), for the loader's skipped list: never dropped in silence."""
    if not meta.has("NVTX_EVENTS", "binaryData"):
        return 0
    total = con.execute(
        f"SELECT count(*) FROM sqlite_query('{alias}', "
        "'SELECT rowid FROM NVTX_EVENTS WHERE binaryData IS NOT NULL')"
    ).fetchone()[0]
    if not total or not has_binary_payloads(meta):
        return int(total)
    done = con.execute(f"SELECT count(*) FROM ({decode_sql(alias)})").fetchone()[0]
    return int(total) - int(done)
