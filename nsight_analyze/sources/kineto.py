"""PyTorch-profiler (Kineto) JSON traces -> canonical tables.

A Kineto trace is one JSON object: metadata keys (`distributedInfo`, `deviceProperties`,
`baseTimeNanoseconds`, ...) around one huge `traceEvents` array of Chrome-trace events.
Files of 1 GB and more exist, so the array is never held in memory. Two parsers read it:

* the fast path (default; kineto_duck.py): one streaming pass decompresses the file and cuts
  the array's text into pieces of whole events (`EventText`, ~32 MiB each); DuckDB's JSON
  reader parses each piece in C++ (two at a time, while the next is decompressed) and SQL
  maps the events to the row sets below. Memory is bounded by a few pieces, not the file.
* the ijson path (C backend), the fallback when DuckDB cannot read a piece (a non-JSON
  file, a cut that was not between two events): each event is dispatched
  on its `cat` into per-table row lists that are flushed every `BATCH_ROWS` rows as a
  pyarrow table. Its bad-input messages are the ones users see.

Both give the same rows (tests/test_kineto_paths.py compares them on every shared trace);
rows go in by `INSERT ... SELECT` over registered Arrow tables. Python's memory is bounded
by pieces / batches, not the file size; what grows beyond that is DuckDB's buffer pool
holding the file's uncommitted rows (the ingest loads a file in one transaction), which
DuckDB's `memory_limit` caps. No Python loop runs per event on the fast path.

Times: Kineto writes `ts`/`dur` in µs, as integers or as decimals with up to 3 fractional
digits (ns resolution). Epoch-µs values near 1.7e15 have 19 significant digits in ns, more
than a double holds, so they are converted exactly to integer ns (`ts × 1000`) from their
decimal text: `decimal.Decimal` on the ijson path, integer arithmetic on the literal's
digits on the fast path (kineto_duck.py says how it gets the literal). Times stay on the
file's own timeline; the wall clock of the file is `ts_ns + baseTimeNanoseconds` (newer
traces) or `ts_ns` itself (older traces whose ts are Unix-epoch µs), which is what
`session_start_utc_ns` encodes for the ingest's coarse clock alignment.

What goes where (docs/nsys-sqlite-schema.md §12):
  kernel                          -> kernels (classified when the file is read, like nsys files)
  gpu_memcpy / gpu_memset         -> memops (kind, src/dst kinds parsed from the name)
  cuda_runtime / cuda_driver      -> cuda_api (api_class runtime / driver)
  cuda_sync                       -> sync
  user_annotation, ProfilerStep#N -> nvtx (domain 'pytorch', push_pop); cpu_op ProfilerStep
                                     (PyTorch < 1.13 wrote steps as cpu_op) too
  gpu_user_annotation             -> kineto_gpu_annotations (schema_kineto.sql says why)
  NCCL kernel / record_param_comms args -> kineto_collectives
  thread_name metadata            -> threads
  deviceProperties                -> gpus
Everything else (cpu_op, python_function, flows, instant events, ...) is counted in
`files.skipped`.
"""

from __future__ import annotations

import atexit
import contextlib
import gzip
import json
import queue
import re
import threading
import zlib
from collections import Counter, deque
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from decimal import Decimal
from itertools import count
from pathlib import Path
from typing import IO, Any

import duckdb
import pyarrow as pa

from .. import classify
from . import kineto_duck
from .base import BadInput, LoadResult, Probe, Process
from .kineto_duck import NoFastPath

FORMAT = "kineto-json"
PARSES_IN_OWN_THREADS = True  # kineto_duck's parsers: the ingest's own connection needs one thread
SUFFIXES = (".json", ".json.gz")
SNIFF_BYTES = 4 << 20  # metadata before traceEvents (TraceLens puts a whole environment there)
TAIL_BYTES = 4 << 20  # metadata after traceEvents (INFO log lines, distributedInfo in old traces)
BATCH_ROWS = 16384  # rows per table kept in Python before an Arrow flush (~100 MiB at most)
ARROW_BATCH_ROWS = 1 << 17  # rows per table of the fast path's Arrow pieces before an INSERT
READ_CHUNK = 1 << 20
BLOCK_BYTES = 4 << 20  # decompressed text read at once by EventText
# Parse traceEvents with DuckDB's JSON reader (kineto_duck.py); False: the ijson path only
# (read at each load, so tests can compare both paths).
FAST_PATH = True
FIRST_PIECE_BYTES = 4 << 20  # then doubling up to kineto_duck.PIECE_BYTES: the parsers start early
MAX_PIECE_FACTOR = 4  # no event boundary within this many pieces' bytes: leave the file to ijson

# Epoch µs above this (2001-09-09) mean the trace's ts are Unix-epoch µs themselves.
EPOCH_US_THRESHOLD = 10**15

# PyTorch scalar type names as written in NCCL op args -> element size in bytes.
DTYPE_BYTES = {
    "Float": 4,
    "Double": 8,
    "Half": 2,
    "BFloat16": 2,
    "Long": 8,
    "Int": 4,
    "Short": 2,
    "Char": 1,
    "Byte": 1,
    "Bool": 1,
    "ComplexFloat": 8,
    "ComplexDouble": 16,
    "ComplexHalf": 4,
    "Float8_e4m3fn": 1,
    "Float8_e5m2": 1,
    "Float8_e4m3fnuz": 1,
    "Float8_e5m2fnuz": 1,
    "UInt16": 2,
    "UInt32": 4,
    "UInt64": 8,
    "QInt8": 1,
    "QUInt8": 1,
    "QInt32": 4,
}

SYNC_KINDS = {
    "Stream Sync": "stream",
    "Event Sync": "event",
    "Context Sync": "context",
    "Stream Wait Event": "stream_wait_event",
}

_GPU_EVENT_PID = re.compile(
    rb'"cat"\s*:\s*"(?:kernel|gpu_memcpy|gpu_memset)"\s*,\s*"name"\s*:\s*"(?:[^"\\]|\\.)*"\s*,\s*"pid"\s*:\s*(\d+)'
)
_HOST_API_PID = re.compile(
    rb'"cat"\s*:\s*"(?:cuda_runtime|cuda_driver)"\s*,\s*"name"\s*:\s*"(?:[^"\\]|\\.)*"\s*,\s*"pid"\s*:\s*(\d+)'
)
_FIRST_TS = re.compile(rb'"ts"\s*:\s*(\d+(?:\.\d*)?)')
_STEP_NAME = re.compile(r"^ProfilerStep#\d+")

_batch_counter = count()
_piece_counter = count()


# ---------------------------------------------------------------------------------------------
# sniff / probe
# ---------------------------------------------------------------------------------------------
def _open(path: Path) -> IO[bytes]:
    """Binary stream of the JSON text, gzip or plain (by magic bytes, not by suffix)."""
    fh = open(path, "rb")
    magic = fh.read(2)
    fh.seek(0)
    if magic == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=fh, mode="rb")  # type: ignore[return-value]
    return fh


def _head(path: Path, limit: int) -> bytes:
    """Up to `limit` bytes of JSON text; what could be read of a truncated gzip stream."""
    parts: list[bytes] = []
    got = 0
    with _open(path) as fh:
        try:
            while got < limit and (chunk := fh.read(min(1 << 16, limit - got))):
                parts.append(chunk)
                got += len(chunk)
        except EOFError:
            if not parts:
                raise
    return b"".join(parts)


def sniff(path: Path) -> bool:
    """`*.json[.gz]` (including `*.pt.trace.json[.gz]`) whose head holds a `traceEvents` key."""
    name = path.name.lower()
    if not name.endswith(SUFFIXES):
        return False
    key = b'"traceEvents"'
    try:
        with _open(path) as fh:  # stops at the key: every file of a job is sniffed, then probed
            window, read = b"", 0
            while read < SNIFF_BYTES and (chunk := fh.read(1 << 16)):
                read += len(chunk)
                window = window[-len(key) :] + chunk  # a key cut between two chunks is found too
                if key in window:
                    return True
    except (OSError, EOFError, zlib.error):
        return False
    return False


@dataclass
class KinetoMeta:
    """Top-level keys of the trace (everything but traceEvents) and what probe() derived."""

    top: dict[str, Any] = field(default_factory=dict)
    gpu_pid: int | None = None
    host_pid: int | None = None
    device_id: int | None = None
    base_time_ns: int | None = None
    first_ts_us: Decimal | None = None  # first event ts in the head: epoch µs or relative
    tail_pending: bool = False  # deviceProperties may follow traceEvents: read by the load's pass
    warnings: list[str] = field(default_factory=list)

    def device_properties(self) -> dict[int, dict]:
        props = self.top.get("deviceProperties") or []
        return {int(p["id"]): p for p in props if isinstance(p, dict) and isinstance(p.get("id"), int)}


def _loads(text: bytes) -> Any:
    return json.loads(text, parse_float=Decimal)


def _head_meta(head: bytes) -> dict[str, Any] | None:
    """Metadata keys written before traceEvents: the text up to the key, closed as an object."""
    at = head.find(b'"traceEvents"')
    if at < 0:
        return None
    text = head[:at].rstrip()
    if text.endswith(b","):
        text = text[:-1]
    try:
        value = _loads(text + b"}")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _tail_meta(tail: bytes) -> dict[str, Any] | None:
    """Metadata keys written after traceEvents, from the last bytes of the file.

    The array ends with `]` followed by `, "key": ...}`. The earliest candidate `], "` in the
    tail whose remainder parses as object members up to the final `}` is the array's end; a
    candidate inside the array fails at its first unbalanced `}`, so each costs little.
    """
    stripped = tail.rstrip()
    if not stripped.endswith(b"}"):
        return None
    if stripped[:-1].rstrip().endswith(b"]"):
        return {}
    text = tail.decode("utf-8", errors="replace")
    for match in _TAIL_CANDIDATE_STR.finditer(text):
        members = _members(text, match.end() - 1)
        if members is not None:
            return members
    return None


_DECODER = json.JSONDecoder(parse_float=Decimal)
_WS = re.compile(r"\s*")
_TAIL_CANDIDATE_STR = re.compile(r"\]\s*,\s*\"")


def _members(text: str, pos: int) -> dict[str, Any] | None:
    """Parse `"k": v, "k": v }<whitespace><end>` starting at pos; None unless it is exactly that."""
    out: dict[str, Any] = {}
    try:
        while True:
            pos = _WS.match(text, pos).end()
            key, pos = _DECODER.raw_decode(text, pos)
            pos = _WS.match(text, pos).end()
            if not isinstance(key, str) or text[pos : pos + 1] != ":":
                return None
            pos = _WS.match(text, pos + 1).end()
            value, pos = _DECODER.raw_decode(text, pos)
            out[key] = value
            pos = _WS.match(text, pos).end()
            sep = text[pos : pos + 1]
            if sep == "}":
                return out if _WS.match(text, pos + 1).end() == len(text) else None
            if sep != ",":
                return None
            pos += 1
    except ValueError:
        return None


def _read_tail(path: Path, limit: int) -> bytes:
    """Last `limit` bytes of the JSON text (gzip: one decompression pass keeping a rolling tail)."""
    with open(path, "rb") as raw:
        gz = raw.read(2) == b"\x1f\x8b"
        if not gz:
            raw.seek(0, 2)
            size = raw.tell()
            raw.seek(max(0, size - limit))
            return raw.read()
    tail = b""
    with _open(path) as fh:
        while chunk := fh.read(8 * READ_CHUNK):
            tail = (tail + chunk)[-limit:]
    return tail


_ARRAY_OPEN = re.compile(rb'"traceEvents"\s*:\s*\[\s*')
_EVENT_GAP = re.compile(rb"\}\s*,\s*\{")  # between two events (or inside a string: then parsing fails)
_ARRAY_CLOSE = re.compile(rb"\}\s*\]")  # the last event's `}` and the array's `]`
_REST_END = re.compile(rb"\s*\}\s*")
_REST_MORE = re.compile(rb"\s*,\s*")


class EventText:
    """The text of the traceEvents array, in one streaming pass, as files of whole events.

    A piece is cut after an event's `}` followed by `, {`; such a cut inside a string would
    leave an unterminated string, and one inside a nested value unbalanced brackets, so a
    piece that DuckDB parses was cut between two events. At the end, the array closes at the
    first `}]` whose remainder is the object's closing keys (`, "key": value ... }`).
    `tail` is then the text from that `]` to the end of the file.

    Why files: DuckDB's JSON reader reads a piece from a file anyway, and writing each
    decompressed block straight into it holds no piece in Python memory and copies no piece
    (joining blocks into 32 MiB `bytes` cost more in page faults than the decompression).
    """

    def __init__(self, path: Path, piece_bytes: int):
        self.path, self.piece_bytes = path, piece_bytes
        self.tail: bytes | None = None
        self.size = min(FIRST_PIECE_BYTES, piece_bytes)  # the next piece's; a small first one starts early

    def pieces(self, folder: Path) -> Iterator[Path]:
        """Write the pieces as `[events]` files in `folder`; yield each when it is complete."""
        with _open(self.path) as fh:
            head = self._open_array(fh)
            if head[:1] == b"]":  # empty array
                self.tail = self._rest(fh, head)
                if _tail_meta(self.tail) is None:
                    raise NoFastPath("the text after an empty traceEvents is not the object's end")
                return
            writer = _PieceWriter(self, folder)
            try:
                # the last TAIL_BYTES may hold the keys after the array (deviceProperties: `}, {`),
                # so a block is written only once TAIL_BYTES more have been read after it
                recent: deque[bytes] = deque([bytes(head)])
                held = len(head)
                while block := fh.read(BLOCK_BYTES):
                    recent.append(block)
                    held += len(block)
                    while held - len(recent[0]) >= TAIL_BYTES:
                        held -= len(recent[0])
                        yield from writer.write(recent.popleft())
                rest = b"".join(recent)
                end = self._array_end(rest)
                self.tail = rest[end:]
                yield from writer.write(memoryview(rest)[:end])
                yield from writer.finish()
            finally:
                writer.close()

    def _open_array(self, fh: IO[bytes]) -> bytearray:
        """Read up to the array's first element; the buffer then starts there."""
        buf = bytearray()
        while block := fh.read(READ_CHUNK):
            buf += block
            at = buf.find(b'"traceEvents"')
            if at >= 0 and (m := _ARRAY_OPEN.match(buf, at)) is not None and m.end() < len(buf):
                if _head_meta(bytes(buf[: at + 13])) is None:  # the key is not the top level's
                    break
                del buf[: m.end()]
                return buf
            if len(buf) > SNIFF_BYTES:
                break
        raise NoFastPath("traceEvents array not found in the head")

    @staticmethod
    def _rest(fh: IO[bytes], buf: bytearray) -> bytes:
        tail = bytes(buf)
        while block := fh.read(8 * READ_CHUNK):
            tail = (tail + block)[-TAIL_BYTES:]
        return tail

    @staticmethod
    def _array_end(buf: bytearray) -> int:
        """Offset of the `]` that closes traceEvents in the last bytes of the file."""
        text = buf.decode("latin-1")  # one char per byte: offsets agree with buf
        for close in _ARRAY_CLOSE.finditer(buf):
            rest = close.end()
            if _REST_END.fullmatch(buf, rest):
                return rest - 1
            more = _REST_MORE.match(buf, rest)
            if more is not None and _members(text, more.end()) is not None:
                return rest - 1
        raise NoFastPath("end of the traceEvents array not found")


class _PieceWriter:
    """Writes blocks of event text into piece files, cutting at the first event gap past the
    piece's size (EventText.size, which doubles from the first piece's up to piece_bytes)."""

    def __init__(self, text: EventText, folder: Path):
        self.text, self.folder = text, folder
        self.out: IO[bytes] | None = None
        self.path: Path | None = None
        self.written = 0

    def write(self, block: bytes | memoryview) -> Iterator[Path]:
        view = memoryview(block)
        pos = 0
        while pos < len(view):
            if self.out is None:
                self._open()
            gap = _EVENT_GAP.search(view, pos + max(self.text.size - self.written, 0))
            if gap is None:
                self._put(view[pos:])
                if self.written > MAX_PIECE_FACTOR * self.text.piece_bytes:
                    raise NoFastPath("no event boundary found")
                return
            self._put(view[pos : gap.start() + 1])
            yield from self.finish()
            self.text.size = min(2 * self.text.size, self.text.piece_bytes)
            pos = gap.end() - 1

    def finish(self) -> Iterator[Path]:
        """Close the piece being written (if any) and yield it."""
        if self.out is not None:
            self.out.write(b"]")
            self.out.close()
            self.out = None
            yield self.path

    def close(self) -> None:
        """Stop early (the reader was closed or failed): the unfinished piece is deleted."""
        if self.out is not None:
            self.out.close()
            self.out = None
            self.path.unlink(missing_ok=True)

    def _open(self) -> None:
        self.path = self.folder / f"piece{next(_piece_counter)}.json"
        self.out = open(self.path, "wb")
        self.out.write(b"[")
        self.written = 0

    def _put(self, data: memoryview) -> None:
        self.out.write(data)
        self.written += len(data)


def probe(path: Path) -> Probe:
    meta = read_meta(path)
    top = meta.top
    dist = top.get("distributedInfo") if isinstance(top.get("distributedInfo"), dict) else {}
    rank = dist.get("rank") if isinstance(dist.get("rank"), int) else None
    world = dist.get("world_size") if isinstance(dist.get("world_size"), int) else _pg_world(dist)
    props = meta.device_properties()
    gpu = props.get(meta.device_id) if meta.device_id is not None else None
    process = Process(
        key=meta.gpu_pid if meta.gpu_pid is not None else 0,
        pid=meta.host_pid,
        device_id=meta.device_id,
        claimed_rank=rank,
        rank_source="kineto:distributedInfo" if rank is not None else None,
        world_size=world,
        gpu_name=gpu.get("name") if gpu else None,
        session_start_utc_ns=_session_start(meta),
    )
    warnings = list(meta.warnings)
    if not dist:
        warnings.append("no distributedInfo: the rank comes from the file name or order")
    version = top.get("cupti_version")
    return Probe(
        format=FORMAT,
        processes=[process],
        version=f"cupti {version}" if version is not None else None,
        schema_version=str(top["schemaVersion"]) if "schemaVersion" in top else None,
        warnings=warnings,
        context=meta,
    )


def _pg_world(dist: dict) -> int | None:
    """World size from distributedInfo.pg_config when world_size is absent: the default process
    group's size (pg_desc 'default_pg' or pg_name '0'), else the largest group's."""
    config = dist.get("pg_config") if isinstance(dist.get("pg_config"), list) else []
    groups = [g for g in config if isinstance(g, dict) and isinstance(g.get("pg_size"), int)]
    default = [g for g in groups if g.get("pg_desc") == "default_pg" or str(g.get("pg_name")) == "0"]
    sizes = [g["pg_size"] for g in default or groups]
    return max(sizes) if sizes else None


def read_meta(path: Path) -> KinetoMeta:
    """Top-level metadata from the head (and, when needed, the tail) of the file; no event parse."""
    try:
        head = _head(path, SNIFF_BYTES)
    except (OSError, EOFError, zlib.error) as exc:
        raise BadInput(f"cannot read the Kineto trace ({exc})") from None
    if b'"traceEvents"' not in head:
        raise BadInput("not a PyTorch-profiler trace: no traceEvents key near the start of the file")
    meta = KinetoMeta()
    top = _head_meta(head)
    if top is None:
        meta.warnings.append("metadata before traceEvents could not be read")
        top = {}
    complete = len(head) < SNIFF_BYTES
    meta.top = top
    if "distributedInfo" not in top or (complete and not top.get("deviceProperties")):
        try:
            tail = head if complete else _read_tail(path, TAIL_BYTES)
        except (OSError, EOFError, zlib.error) as exc:
            raise BadInput(f"the Kineto trace is truncated or corrupt ({exc})") from None
        if not _merge_tail(meta, tail):
            raise BadInput("the Kineto trace is truncated: its JSON does not end after traceEvents")
    else:
        # Only deviceProperties may follow: the load's single pass reads them (a gzip's tail
        # costs a decompression of the whole file), and load() completes the Process.
        meta.tail_pending = not top.get("deviceProperties")
    if (m := _GPU_EVENT_PID.search(head)) is not None:
        meta.gpu_pid = int(m.group(1))
    if (m := _HOST_API_PID.search(head)) is not None:
        meta.host_pid = int(m.group(1))
    _derive(meta)
    if (m := _FIRST_TS.search(head[head.find(b'"traceEvents"') :])) is not None:
        meta.first_ts_us = Decimal(m.group(1).decode())
    return meta


def _merge_tail(meta: KinetoMeta, tail: bytes) -> bool:
    """Add the keys written after traceEvents; False when the text does not end there."""
    extra = _tail_meta(tail)
    if extra is None:
        return False
    top = meta.top
    for key, value in extra.items():
        if key not in top or (key == "deviceProperties" and not top.get(key)):
            top[key] = value
    meta.tail_pending = False
    return True


def _derive(meta: KinetoMeta) -> None:
    """The rank's device and time base from the metadata (and the head's first events)."""
    props = meta.device_properties()
    meta.device_id = None
    if meta.gpu_pid is not None and (meta.gpu_pid in props or not props):
        meta.device_id = meta.gpu_pid  # Kineto's GPU "pid" is the CUDA device ordinal
    elif len(props) == 1:
        meta.device_id = next(iter(props))
    base = meta.top.get("baseTimeNanoseconds")
    meta.base_time_ns = int(base) if isinstance(base, (int, Decimal)) else None


def _session_start(meta: KinetoMeta) -> int | None:
    """Wall clock (UTC ns) of the file's time zero: wall_ns = ts_ns + this value."""
    if meta.base_time_ns is not None:
        return meta.base_time_ns
    first = meta.first_ts_us
    if first is not None and first >= EPOCH_US_THRESHOLD:
        return 0  # ts are Unix-epoch µs already
    return None


# ---------------------------------------------------------------------------------------------
# load
# ---------------------------------------------------------------------------------------------
def _ns(value: Any) -> int | None:
    """µs (int or exact Decimal) -> integer ns, exactly; sub-ns digits round half-even."""
    if type(value) is int:
        return value * 1000
    if type(value) is Decimal:
        return int((value * 1000).to_integral_value())
    if isinstance(value, float):  # not produced by ijson's Decimal mode; kept for safety
        return round(value * 1000)
    return None


def _int(value: Any) -> int | None:
    if type(value) is int:
        return value
    if type(value) is Decimal and value == value.to_integral_value():
        return int(value)
    return None


def _dim(value: Any, i: int) -> int | None:
    if isinstance(value, list) and len(value) > i:
        return _int(value[i])
    return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)


class _Batch:
    """Rows of one target, flushed into DuckDB as an Arrow table every BATCH_ROWS rows.

    The ijson path adds rows as tuples (one append per event), transposed into columns at
    flush time by zip(*rows), which runs in C; the fast path adds Arrow tables.
    """

    def __init__(
        self, con: duckdb.DuckDBPyConnection, schema: pa.Schema, insert: str | Callable[[str], None]
    ):
        """`insert`: an INSERT whose `{src}` names the registered Arrow table, or a function of it."""
        self.con, self.schema, self.insert = con, schema, insert
        self.pending: list[tuple] = []
        self.tables: list[pa.Table] = []
        self.table_rows = 0
        self.total = 0

    def add(self, *values: Any) -> None:
        self.pending.append(values)
        if len(self.pending) >= BATCH_ROWS:
            self.flush()

    def add_table(self, table: pa.Table) -> None:
        """Rows with this batch's columns (by name; types are cast), inserted with later ones."""
        if table.num_rows:
            self.tables.append(table)
            self.table_rows += table.num_rows
            if self.table_rows >= ARROW_BATCH_ROWS:
                self.flush()

    def flush(self) -> None:
        if self.pending:
            columns = zip(*self.pending, strict=True)
            self.tables.append(
                pa.Table.from_arrays(
                    [pa.array(col, type=f.type) for col, f in zip(columns, self.schema, strict=True)],
                    schema=self.schema,
                )
            )
            self.pending = []
        if not self.tables:
            return
        table = pa.concat_tables(self.tables, promote_options="permissive")
        self.tables, self.table_rows = [], 0
        name = f"kineto_batch_{next(_batch_counter)}"
        self.con.register(name, table)
        try:
            if callable(self.insert):
                self.insert(name)
            else:
                self.con.execute(self.insert.replace("{src}", name))
        finally:
            self.con.unregister(name)
        self.total += table.num_rows


def _schema(*cols: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema([pa.field(n, t) for n, t in cols])


I64, I32, STR = pa.int64(), pa.int32(), pa.string()

KERNEL_SCHEMA = _schema(
    ("device_id", I32),
    ("stream_id", I64),
    ("start_ns", I64),
    ("end_ns", I64),
    ("name", STR),
    ("correlation_id", I64),
    ("grid_x", I32),
    ("grid_y", I32),
    ("grid_z", I32),
    ("block_x", I32),
    ("block_y", I32),
    ("block_z", I32),
    ("registers_per_thread", I32),
)
MEMOP_SCHEMA = _schema(
    ("device_id", I32),
    ("stream_id", I64),
    ("start_ns", I64),
    ("end_ns", I64),
    ("name", STR),
    ("bytes", I64),
    ("correlation_id", I64),
)
API_SCHEMA = _schema(
    ("tid", I64),
    ("start_ns", I64),
    ("end_ns", I64),
    ("name", STR),
    ("correlation_id", I64),
    ("api_class", STR),
)
SYNC_SCHEMA = _schema(
    ("device_id", I32),
    ("stream_id", I64),
    ("start_ns", I64),
    ("end_ns", I64),
    ("kind", STR),
    ("correlation_id", I64),
)
NVTX_SCHEMA = _schema(("tid", I64), ("start_ns", I64), ("end_ns", I64), ("text", STR))
GPU_ANNOTATION_SCHEMA = _schema(
    ("device_id", I32),
    ("stream_id", I64),
    ("start_ns", I64),
    ("end_ns", I64),
    ("text", STR),
    ("external_id", I64),
)
COMM_SCHEMA = _schema(
    ("kind", STR),
    ("correlation_id", I64),
    ("external_id", I64),
    ("stream_id", I64),
    ("start_ns", I64),
    ("end_ns", I64),
    ("kernel_name", STR),
    ("collective", STR),
    ("dtype", STR),
    ("in_nelems", I64),
    ("out_nelems", I64),
    ("in_split_size", STR),
    ("out_split_size", STR),
    ("group_size", I32),
    ("pg_name", STR),
    ("pg_desc", STR),
    ("pg_ranks", STR),
)
THREAD_SCHEMA = _schema(("pid", I64), ("tid", I64), ("name", STR))


class _TailKeeper:
    """File wrapper that remembers the last bytes read: the metadata written after traceEvents
    (e.g. baseTimeNanoseconds) comes for free at the end of the one streaming pass."""

    def __init__(self, fh: IO[bytes], limit: int):
        self.fh, self.limit = fh, limit
        self.chunks: list[bytes] = []
        self.kept = 0

    def read(self, n: int = -1) -> bytes:
        data = self.fh.read(n)
        if data:
            self.chunks.append(data)
            self.kept += len(data)
            while self.chunks and self.kept - len(self.chunks[0]) >= self.limit:
                self.kept -= len(self.chunks.pop(0))
        return data

    def tail(self) -> bytes:
        return b"".join(self.chunks)[-self.limit :]

    def close(self) -> None:
        self.fh.close()


class _Loader:
    """One file's streaming parse: events -> column batches -> canonical tables."""

    def __init__(
        self, con: duckdb.DuckDBPyConnection, path: Path, rank: int, meta: KinetoMeta, result: LoadResult
    ):
        self.con, self.path, self.rank, self.meta, self.result = con, path, rank, meta, result
        self.tmp = f"kineto_comm_{next(_batch_counter)}"
        self.skipped: Counter[str] = Counter()
        self.devices: Counter[int] = Counter()
        self.host_pids: Counter[int] = Counter()
        self.reader: _TailKeeper | None = None
        self.tail: bytes | None = None  # text after the array, when the fast path read the file
        self.probe_device = meta.device_id  # the device probe() would have found (tail_pending)
        self.bad = 0
        r = int(rank)
        self.kernels = _Batch(con, KERNEL_SCHEMA, self._insert_kernels)
        self.memops = _Batch(
            con,
            MEMOP_SCHEMA,
            f"""
            INSERT INTO memops (rank, device_id, stream_id, start_ns, end_ns, duration_ns, kind, bytes,
                                src_kind, dst_kind, correlation_id)
            SELECT {r}, device_id, stream_id, start_ns, end_ns, end_ns - start_ns,
                   CASE WHEN name LIKE 'Memset%' THEN 'memset'
                        ELSE nullif(regexp_extract(name, '^Memcpy\\s+(\\w+)', 1), '') END,
                   bytes,
                   CASE WHEN name LIKE 'Memset%' THEN NULL
                        ELSE nullif(trim(regexp_extract(name, '\\(([^()]*?)\\s*->', 1)), '') END,
                   CASE WHEN name LIKE 'Memset%'
                        THEN nullif(trim(regexp_extract(name, '\\(([^()]*)\\)', 1)), '')
                        ELSE nullif(trim(regexp_extract(name, '->\\s*([^()]*)\\)', 1)), '') END,
                   correlation_id
            FROM {{src}}""",
        )
        self.api = _Batch(
            con,
            API_SCHEMA,
            f"""
            INSERT INTO cuda_api (rank, tid, start_ns, end_ns, duration_ns, name, correlation_id,
                                  return_value, api_class)
            SELECT {r}, tid, start_ns, end_ns, end_ns - start_ns, regexp_replace(name, '_v[0-9]{{4,}}$', ''),
                   correlation_id, NULL, api_class
            FROM {{src}}""",
        )
        self.sync = _Batch(
            con,
            SYNC_SCHEMA,
            f"""
            INSERT INTO sync (rank, device_id, stream_id, start_ns, end_ns, duration_ns, sync_type, event_id,
                              correlation_id)
            SELECT {r}, device_id, stream_id, start_ns, end_ns, end_ns - start_ns, kind, NULL, correlation_id
            FROM {{src}}""",
        )
        self.nvtx = _Batch(
            con,
            NVTX_SCHEMA,
            f"""
            INSERT INTO nvtx (rank, tid, start_ns, end_ns, text, domain, event_type, payload)
            SELECT {r}, tid, start_ns, end_ns, text, 'pytorch', 'push_pop', NULL FROM {{src}}""",
        )
        self.gpu_ann = _Batch(
            con,
            GPU_ANNOTATION_SCHEMA,
            f"""
            INSERT INTO kineto_gpu_annotations
            SELECT {r}, device_id, stream_id, start_ns, end_ns, text, external_id FROM {{src}}""",
        )
        self.comm = _Batch(con, COMM_SCHEMA, f"INSERT INTO {self.tmp} SELECT * FROM {{src}}")
        self.threads = _Batch(con, THREAD_SCHEMA, f"INSERT INTO {self.tmp}_threads SELECT * FROM {{src}}")
        self.handlers = {
            "kernel": self.on_kernel,
            "gpu_memcpy": self.on_memop,
            "gpu_memset": self.on_memop,
            "cuda_runtime": self.on_api,
            "cuda_driver": self.on_api,
            "cuda_sync": self.on_sync,
            "user_annotation": self.on_annotation,
            "gpu_user_annotation": self.on_gpu_annotation,
            "cpu_op": self.on_cpu_op,
        }

    def _insert_kernels(self, src: str) -> None:
        """Kernels go to `kernels` classified, as nsys files' do (classify.classify_kernels would
        otherwise move them out and back again): the rules and the short name are applied once
        per distinct name of the batch, then joined."""
        names = f"{self.tmp}_names"
        classify.build_name_map(self.con, f"SELECT name FROM {src}", names)
        self.con.execute(
            f"""
            INSERT INTO kernels (rank, device_id, stream_id, start_ns, end_ns, duration_ns, name, short_name,
                                 correlation_id, grid_x, grid_y, grid_z, block_x, block_y, block_z,
                                 registers_per_thread, category, subcategory)
            SELECT {int(self.rank)}, k.device_id, k.stream_id, k.start_ns, k.end_ns, k.end_ns - k.start_ns,
                   k.name, m.short_name, k.correlation_id, k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y,
                   k.block_z, k.registers_per_thread, coalesce(m.category, 'other'), m.subcategory
            FROM {src} AS k
            LEFT JOIN (SELECT *, regexp_replace(regexp_replace(name, '^void\\s+', ''), '[(<].*$', '')
                                 AS short_name
                       FROM {names}) AS m ON m.name = k.name"""
        )

    # -- per-event handlers (the only Python loop) ---------------------------------------------
    def _span(self, ev: dict) -> tuple[int, int] | None:
        start = _ns(ev.get("ts"))
        dur = _ns(ev.get("dur"))
        if start is None or dur is None:
            self.bad += 1
            return None
        return start, start + dur

    def on_kernel(self, ev: dict) -> None:
        span = self._span(ev)
        if span is None:
            return
        a = ev.get("args") or {}
        device = _int(a.get("device"))
        if device is None:
            device = _int(ev.get("pid"))
        if device is not None:
            self.devices[device] += 1
        grid, block = a.get("grid"), a.get("block")
        name = ev.get("name")
        corr = _int(a.get("correlation"))
        stream = _int(a.get("stream"))
        self.kernels.add(
            device,
            stream,
            span[0],
            span[1],
            name,
            corr,
            _dim(grid, 0),
            _dim(grid, 1),
            _dim(grid, 2),
            _dim(block, 0),
            _dim(block, 1),
            _dim(block, 2),
            _int(a.get("registers per thread")),
        )
        if "Collective name" in a or (isinstance(name, str) and "nccl" in name):
            self._comm("kernel", a, corr, _int(a.get("External id")), stream, span, name)

    def _comm(
        self,
        kind: str,
        a: dict,
        corr: int | None,
        ext: int | None,
        stream: int | None,
        span: tuple[int, int] | None,
        name: str | None,
    ) -> None:
        self.comm.add(
            kind,
            corr,
            ext,
            stream,
            span[0] if span else None,
            span[1] if span else None,
            name,
            _text(a.get("Collective name")),
            _text(a.get("dtype")),
            _int(a.get("In msg nelems")),
            _int(a.get("Out msg nelems")),
            _text(a.get("In split size")),
            _text(a.get("Out split size")),
            _int(a.get("Group size")),
            _text(a.get("Process Group Name")),
            _text(a.get("Process Group Description")),
            _text(a.get("Process Group Ranks")),
        )

    def on_memop(self, ev: dict) -> None:
        span = self._span(ev)
        if span is None:
            return
        a = ev.get("args") or {}
        device = _int(a.get("device"))
        if device is not None:
            self.devices[device] += 1
        self.memops.add(
            device,
            _int(a.get("stream")),
            span[0],
            span[1],
            ev.get("name"),
            _int(a.get("bytes")),
            _int(a.get("correlation")),
        )

    def on_api(self, ev: dict) -> None:
        span = self._span(ev)
        if span is None:
            return
        a = ev.get("args") or {}
        pid = ev.get("pid")
        if type(pid) is int:
            self.host_pids[pid] += 1
        self.api.add(
            _int(ev.get("tid")),
            span[0],
            span[1],
            ev.get("name"),
            _int(a.get("correlation")),
            "runtime" if ev.get("cat") == "cuda_runtime" else "driver",
        )

    def on_sync(self, ev: dict) -> None:
        span = self._span(ev)
        if span is None:
            return
        a = ev.get("args") or {}
        kind = a.get("cuda_sync_kind") or ev.get("name")
        self.sync.add(
            _int(a.get("device")),
            _int(a.get("stream")),
            span[0],
            span[1],
            SYNC_KINDS.get(kind, "unknown"),
            _int(a.get("correlation")),
        )

    def on_annotation(self, ev: dict) -> None:
        span = self._span(ev)
        if span is None:
            return
        self.nvtx.add(_int(ev.get("tid")), span[0], span[1], _text(ev.get("name")))

    def on_gpu_annotation(self, ev: dict) -> None:
        span = self._span(ev)
        if span is None:
            return
        a = ev.get("args") or {}
        device = _int(a.get("device"))
        if device is None:
            device = _int(ev.get("pid"))
        self.gpu_ann.add(
            device, _int(ev.get("tid")), span[0], span[1], _text(ev.get("name")), _int(a.get("External id"))
        )

    def on_cpu_op(self, ev: dict) -> None:
        name = ev.get("name")
        if name == "record_param_comms":
            a = ev.get("args") or {}
            if "Collective name" in a:
                self._comm("cpu_op", a, None, _int(a.get("External id")), None, None, None)
            self.skipped["cpu_op"] += 1
        elif isinstance(name, str) and name.startswith("ProfilerStep#") and _STEP_NAME.match(name):
            self.on_annotation(ev)
        else:
            self.skipped["cpu_op"] += 1

    def on_metadata(self, ev: dict) -> None:
        if ev.get("name") == "thread_name":
            name = (ev.get("args") or {}).get("name")
            self.threads.add(_int(ev.get("pid")), _int(ev.get("tid")), _text(name))
        else:
            self.skipped["metadata (ph M)"] += 1

    # -- the pass ------------------------------------------------------------------------------
    def events(self) -> Iterator[dict]:
        import ijson  # imported here so that sniff/probe work without it

        fh = _TailKeeper(_open(self.path), TAIL_BYTES)
        self.reader = fh
        try:
            yield from ijson.items(fh, "traceEvents.item", buf_size=READ_CHUNK)
        finally:
            fh.close()

    def run(self) -> None:
        columns = ", ".join(f"{f.name} {_duck(f.type)}" for f in COMM_SCHEMA)
        self.con.execute(f"CREATE TEMP TABLE {self.tmp} ({columns})")
        self.con.execute(f"CREATE TEMP TABLE {self.tmp}_threads (pid BIGINT, tid BIGINT, name VARCHAR)")
        try:
            if not self._scan():
                self._stream()
            for batch in self.batches().values():
                batch.flush()
            self._finish()
        finally:
            for suffix in ("", "_threads", "_names"):
                self.con.execute(f"DROP TABLE IF EXISTS {self.tmp}{suffix}")

    def batches(self) -> dict[str, _Batch]:
        """The row sets, by the names kineto_duck.TARGETS uses."""
        return {
            "kernels": self.kernels,
            "memops": self.memops,
            "api": self.api,
            "sync": self.sync,
            "nvtx": self.nvtx,
            "gpu_ann": self.gpu_ann,
            "comm": self.comm,
            "threads": self.threads,
        }

    def _scan(self) -> bool:
        """The fast path: pieces of the array parsed by DuckDB (kineto_duck) while the next ones
        are decompressed. False, with nothing loaded, when it cannot read the file; the ijson
        pass then loads it or says why it cannot."""
        if not FAST_PATH:
            return False
        ahead = _take_read_ahead(self.path)
        text = ahead.text if ahead else EventText(self.path, kineto_duck.PIECE_BYTES)
        try:
            with closing(ahead.pieces()) if ahead else _parsed(text) as pieces:
                for piece in pieces:
                    self._add(piece)
        except (NoFastPath, OSError, EOFError, zlib.error):
            self._undo()
            return False
        self.tail = text.tail
        return True

    def _add(self, parsed: kineto_duck.Piece) -> None:
        batches = self.batches()
        for name, table in parsed.tables.items():
            batches[name].add_table(table)
        self.skipped.update(parsed.skipped)
        self.bad += parsed.bad
        for device, n in parsed.devices:
            self.devices[device] += n
        for pid, n in parsed.host_pids:
            self.host_pids[pid] += n

    def _undo(self) -> None:
        """Forget what the fast path loaded (this rank's rows are only this file's)."""
        batches = self.batches()
        if any(b.total for b in batches.values()):
            for table in ("kernels", "memops", "cuda_api", "sync", "nvtx", "kineto_gpu_annotations"):
                self.con.execute(f"DELETE FROM {table} WHERE rank = ?", [self.rank])
            for suffix in ("", "_threads"):
                self.con.execute(f"DELETE FROM {self.tmp}{suffix}")
        for batch in batches.values():
            batch.total = batch.table_rows = 0
            batch.tables = []
        self.skipped.clear()
        self.devices.clear()
        self.host_pids.clear()
        self.bad = 0

    def _stream(self) -> None:
        try:
            import ijson
        except ImportError:
            raise BadInput("reading Kineto traces needs the package ijson: pip install ijson") from None

        handlers = self.handlers
        skipped = self.skipped
        try:
            for ev in self.events():
                if type(ev) is not dict:
                    skipped["non-object entries"] += 1
                    continue
                handler = handlers.get(ev.get("cat"))
                if handler is not None:
                    handler(ev)
                elif ev.get("ph") == "M":
                    self.on_metadata(ev)
                else:
                    skipped[str(ev.get("cat") or f"ph {ev.get('ph')}")] += 1
        except ijson.JSONError as exc:
            raise BadInput(f"the Kineto trace is not valid JSON ({str(exc).splitlines()[0][:120]})") from None
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise BadInput(f"the Kineto trace is truncated or corrupt ({exc})") from None

    def _finish(self) -> None:
        r = int(self.rank)
        self.con.execute(
            f"""
            INSERT INTO kineto_collectives
            WITH ops AS (
                SELECT * FROM {self.tmp} WHERE kind = 'cpu_op' AND external_id IS NOT NULL
                QUALIFY row_number() OVER (PARTITION BY external_id ORDER BY collective) = 1
            ),
            k AS (SELECT * FROM {self.tmp} WHERE kind = 'kernel'),
            m AS (
                SELECT k.correlation_id, k.external_id, k.stream_id, k.start_ns, k.end_ns, k.kernel_name,
                       CASE WHEN k.collective IS NOT NULL THEN 'kernel-args' ELSE 'record_param_comms' END
                           AS source,
                       CASE WHEN k.collective IS NOT NULL THEN k ELSE ops END AS a
                FROM k LEFT JOIN ops ON k.collective IS NULL AND ops.external_id = k.external_id
                WHERE k.collective IS NOT NULL OR ops.collective IS NOT NULL
            )
            SELECT {r}, correlation_id, external_id, stream_id, start_ns, end_ns, kernel_name,
                   a.collective, a.dtype, d.bytes, a.in_nelems, a.out_nelems,
                   a.in_nelems * d.bytes, a.out_nelems * d.bytes, a.in_split_size, a.out_split_size,
                   a.group_size, a.pg_name, a.pg_desc, TRY_CAST(a.pg_ranks AS INTEGER[]), source
            FROM m LEFT JOIN (SELECT unnest(?::VARCHAR[]) AS dtype, unnest(?::INTEGER[]) AS bytes) d
              ON d.dtype = a.dtype
            """,
            [list(DTYPE_BYTES), list(DTYPE_BYTES.values())],
        )
        if self.meta.host_pid is None and self.host_pids:
            self.meta.host_pid = self.host_pids.most_common(1)[0][0]
        host_pid = self.meta.host_pid
        where = f"WHERE pid = {int(host_pid)}" if host_pid is not None else ""
        self.con.execute(
            f"INSERT INTO threads SELECT DISTINCT {r}, tid, name FROM {self.tmp}_threads {where}"
        )
        self._tail_metadata()
        self._gpus()
        self._report()

    def _tail_metadata(self) -> None:
        """Keys after traceEvents that probe() did not read (it reads a gzip's tail only when needed)."""
        tail = self.tail if self.tail is not None else self.reader.tail() if self.reader else None
        meta = self.meta
        if tail is None or (meta.base_time_ns is not None and not meta.tail_pending):
            return
        if meta.tail_pending:  # what probe() would have derived with the whole metadata
            if _merge_tail(meta, tail):
                _derive(meta)
            self.probe_device = meta.device_id
            return
        extra = _tail_meta(tail) or {}
        base = extra.get("baseTimeNanoseconds")
        if isinstance(base, int):
            meta.base_time_ns = base

    def _gpus(self) -> None:
        proc_device = self.meta.device_id
        if self.devices:
            main = self.devices.most_common(1)[0][0]
            if proc_device is None or proc_device not in self.devices:
                self.meta.device_id = proc_device = main
            if len(self.devices) > 1:
                self.result.warnings.append(
                    f"GPU work on {len(self.devices)} devices ({', '.join(map(str, sorted(self.devices)))}) "
                    "in one trace: all of it is attributed to one rank"
                )
        props = self.meta.device_properties()
        rows = []
        for dev in sorted(set(self.devices) | ({proc_device} if proc_device is not None else set())):
            p = props.get(dev, {})
            rows.append(
                (
                    self.rank,
                    dev,
                    p.get("name"),
                    _int(p.get("numSms")),
                    None,
                    None,
                    _int(p.get("totalGlobalMem")),
                    _int(p.get("computeMajor")),
                    _int(p.get("computeMinor")),
                    None,
                    None,
                    "kineto" if p else "unknown",
                )
            )
        if not rows:
            rows.append((self.rank, None, None, None, None, None, None, None, None, None, None, "unknown"))
        self.con.executemany("INSERT INTO gpus VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)

    def _report(self) -> None:
        counts = self.result.counts
        batches = (
            ("kernels", self.kernels),
            ("memops", self.memops),
            ("cuda_api", self.api),
            ("sync", self.sync),
            ("nvtx", self.nvtx),
            ("kineto_gpu_annotations", self.gpu_ann),
        )
        for table, batch in batches:
            counts[table] = counts.get(table, 0) + batch.total
        counts["kineto_collectives"] = self.con.execute(
            "SELECT count(*) FROM kineto_collectives WHERE rank = ?", [self.rank]
        ).fetchone()[0]
        for what, n in sorted(self.skipped.items()):
            self.result.skipped.append(f"{what}: {n} events (not used by nsight-analyze)")
        if self.bad:
            self.result.warnings.append(f"{self.bad} events without ts/dur were not loaded")


def _duck(t: pa.DataType) -> str:
    return {I64: "BIGINT", I32: "INTEGER", STR: "VARCHAR"}[t]


@contextlib.contextmanager
def _parsed(text: EventText) -> Iterator[Iterator[kineto_duck.Piece]]:
    """The pieces of a file parsed by DuckDB, in order (kineto_duck.Parser.parse_all)."""
    parser = _shared_parser()
    with closing(parser.parse_all(text.pieces(parser.dir))) as pieces:
        yield pieces


_parser: kineto_duck.Parser | None = None
_parser_lock = threading.Lock()


def _shared_parser() -> kineto_duck.Parser:
    """One parser for every file of the process, closed at exit.

    Why shared: a fresh in-memory DuckDB per file cost ~0.1 CPU-s of warm-up (allocator, page
    faults) per file. Files parsed at once (the read-ahead) share its cursors, so at most
    kineto_duck.WORKERS pieces are parsed at a time, whatever the number of files."""
    global _parser
    with _parser_lock:
        if _parser is None:
            _parser = kineto_duck.Parser(SYNC_KINDS)
            atexit.register(_parser.close)
        return _parser


# ---------------------------------------------------------------------------------------------
# read-ahead: the next file is parsed while the ingest inserts and commits this one
# ---------------------------------------------------------------------------------------------
READ_AHEAD_FILES = 2  # files parsed ahead of their load (the ingest asks for the next one)
READ_AHEAD_PIECES = 8  # parsed pieces a read-ahead keeps before its load takes them
READ_AHEAD_WAIT_S = 600  # a read-ahead nobody takes for this long gives up (frees its memory)


class _ReadAhead:
    """The fast path's pipeline on one file, run before its load(), which takes its pieces."""

    def __init__(self, path: Path):
        self.path = path
        self.text = EventText(path, kineto_duck.PIECE_BYTES)
        self.queue: queue.Queue = queue.Queue(maxsize=READ_AHEAD_PIECES)
        self.cancelled = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"kineto-read-ahead {path.name}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            with _parsed(self.text) as pieces:
                for piece in pieces:
                    if not self._put(piece):
                        return
            self._put(None)
        except BaseException as exc:  # noqa: BLE001 - raised again in the load that takes it
            self._put(exc)

    def _put(self, item: Any) -> bool:
        waited = 0.0
        while not self.cancelled.is_set() and waited < READ_AHEAD_WAIT_S:
            try:
                self.queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                waited += 0.1
        self.cancelled.set()
        return False

    def pieces(self) -> Iterator[kineto_duck.Piece]:
        try:
            while (item := self.queue.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            self.cancel()

    def cancel(self) -> None:
        self.cancelled.set()
        with contextlib.suppress(queue.Empty):
            while True:  # a _put blocked on a full queue sees `cancelled` at its next try
                self.queue.get_nowait()
        self.thread.join()


_read_ahead: dict[Path, _ReadAhead] = {}
_read_ahead_lock = threading.Lock()


def prefetch(path: Path) -> None:
    """Start parsing `path` in the background for a load() of it that follows soon: the ingest
    calls this for its first file while it prepares them all, and for its next file before it
    loads the current one, so that parsing one file overlaps with inserting the other. Memory
    stays bounded: at most READ_AHEAD_FILES files are read ahead, each up to READ_AHEAD_PIECES
    parsed pieces."""
    if not FAST_PATH:
        return
    with _read_ahead_lock:
        if path in _read_ahead:
            return
        while len(_read_ahead) >= READ_AHEAD_FILES:  # the oldest was not loaded after all
            _read_ahead.pop(next(iter(_read_ahead))).cancel()
        _read_ahead[path] = _ReadAhead(path)


def cancel_prefetch() -> None:
    """Stop and forget every read-ahead no load() took (the ingest calls this when it ends:
    a file prefetched early may have turned out a duplicate or failed its probe)."""
    with _read_ahead_lock:
        pending = list(_read_ahead.values())
        _read_ahead.clear()
    for ahead in pending:
        ahead.cancel()


def _take_read_ahead(path: Path) -> _ReadAhead | None:
    with _read_ahead_lock:
        ahead = _read_ahead.pop(path, None)
    if ahead is not None and ahead.cancelled.is_set():  # gave up waiting: parse again
        ahead.cancel()
        return None
    return ahead


def load(
    con: duckdb.DuckDBPyConnection, path: Path, file_id: int, ranks: dict[int, int], probe: Probe
) -> LoadResult:
    meta: KinetoMeta = probe.context if isinstance(probe.context, KinetoMeta) else read_meta(path)
    if len(set(ranks.values())) != 1:
        raise BadInput("a Kineto trace holds exactly one rank")
    rank = next(iter(ranks.values()))
    result = LoadResult(warnings=list(probe.warnings))
    pending = meta.tail_pending
    loader = _Loader(con, path, rank, meta, result)
    try:
        loader.run()
    except duckdb.Error as exc:
        raise BadInput(f"failed while loading events ({str(exc).splitlines()[0]})") from None
    except OSError as exc:
        raise BadInput(f"cannot read the Kineto trace ({exc})") from None
    # Device, host pid and time base are only certain after the full pass; the ingest inserts
    # the ranks row after load(), from this Process.
    if probe.processes:
        proc = probe.processes[0]
        if pending:  # probe() left deviceProperties to this pass
            proc.device_id = loader.probe_device
            gpu = (
                meta.device_properties().get(loader.probe_device) if loader.probe_device is not None else None
            )
            proc.gpu_name = gpu.get("name") if gpu else None
        if proc.pid is None:
            proc.pid = meta.host_pid
        if meta.base_time_ns is not None:
            proc.session_start_utc_ns = meta.base_time_ns
        if proc.device_id is None and meta.device_id is not None:
            proc.device_id = meta.device_id
        if proc.gpu_name is None and meta.device_id is not None:
            proc.gpu_name = meta.device_properties().get(meta.device_id, {}).get("name")
    return result
