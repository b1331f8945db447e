"""Sniffing and probing a Kineto trace: its top-level metadata, without parsing the events.

Why a module of its own: the ingest sniffs and probes every file of a job before it loads
any (ranks are numbered across all files), so this part must be cheap and must not need the
parsers. It reads the head of the file (the keys before `traceEvents`) and, only when the
rank or the GPU is missing there, the tail (the keys after the array; a gzip's tail costs a
decompression of the whole file, so a gzip whose only missing key is `deviceProperties`
leaves it to the load's single pass: `KinetoMeta.tail_pending`).
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

from ..base import BadInput, Probe, Process

FORMAT = "kineto-json"
SUFFIXES = (".json", ".json.gz")
SNIFF_BYTES = 4 << 20  # metadata before traceEvents (TraceLens puts a whole environment there)
TAIL_BYTES = 4 << 20  # metadata after traceEvents (INFO log lines, distributedInfo in old traces)
READ_CHUNK = 1 << 20

# Epoch µs above this (2001-09-09) mean the trace's ts are Unix-epoch µs themselves.
EPOCH_US_THRESHOLD = 10**15

_GPU_EVENT_PID = re.compile(
    rb'"cat"\s*:\s*"(?:kernel|gpu_memcpy|gpu_memset)"\s*,\s*"name"\s*:\s*"(?:[^"\\]|\\.)*"\s*,\s*"pid"\s*:\s*(\d+)'
)
_HOST_API_PID = re.compile(
    rb'"cat"\s*:\s*"(?:cuda_runtime|cuda_driver)"\s*,\s*"name"\s*:\s*"(?:[^"\\]|\\.)*"\s*,\s*"pid"\s*:\s*(\d+)'
)
_FIRST_TS = re.compile(rb'"ts"\s*:\s*(\d+(?:\.\d*)?)')


def open_text(path: Path) -> IO[bytes]:
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
    with open_text(path) as fh:
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
        with open_text(path) as fh:  # stops at the key: every file of a job is sniffed, then probed
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


def head_meta(head: bytes) -> dict[str, Any] | None:
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


def tail_meta(tail: bytes) -> dict[str, Any] | None:
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
        members = object_members(text, match.end() - 1)
        if members is not None:
            return members
    return None


_DECODER = json.JSONDecoder(parse_float=Decimal)
_WS = re.compile(r"\s*")
_TAIL_CANDIDATE_STR = re.compile(r"\]\s*,\s*\"")


def object_members(text: str, pos: int) -> dict[str, Any] | None:
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
    with open_text(path) as fh:
        while chunk := fh.read(8 * READ_CHUNK):
            tail = (tail + chunk)[-limit:]
    return tail


def probe(path: Path) -> Probe:
    meta = read_meta(path)
    top = meta.top
    dist = top.get("distributedInfo") if isinstance(top.get("distributedInfo"), dict) else {}
    rank = dist.get("rank") if isinstance(dist.get("rank"), int) else None
    world = dist.get("world_size") if isinstance(dist.get("world_size"), int) else _pg_world(dist)
    props = meta.device_properties()
    gpu = props.get(meta.device_id) if meta.device_id is not None else None
    process = Process(
        # one process per file: a constant key, not the pid of the first GPU event in the head (the
        # device ordinal, which depends on the events' order in the file)
        key=0,
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
    return Probe(
        format=FORMAT,
        processes=[process],
        version=tracer_version(top),
        schema_version=str(top["schemaVersion"]) if "schemaVersion" in top else None,
        warnings=warnings,
        context=meta,
    )


def tracer_version(top: dict[str, Any]) -> str | None:
    """'cupti N', 'roctracer N' or 'hip N': the tracer that wrote the file (files.nsys_version).

    Why the ROCm ones too: they are what says a trace ran on an AMD GPU (gpus.VENDOR_SQL), which
    ROCm's device properties do not always (an empty name; gfx90a reports CC 9.0, as Hopper does)."""
    for key, label in (
        ("cupti_version", "cupti"),
        ("roctracer_version", "roctracer"),
        ("hip_runtime_version", "hip"),
    ):
        if top.get(key) is not None:
            return f"{label} {top[key]}"
    return None


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
    top = head_meta(head)
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
        if not merge_tail(meta, tail):
            raise BadInput("the Kineto trace is truncated: its JSON does not end after traceEvents")
    else:
        # Only deviceProperties may follow: the load's single pass reads them (a gzip's tail
        # costs a decompression of the whole file), and load() completes the Process.
        meta.tail_pending = not top.get("deviceProperties")
    if (m := _GPU_EVENT_PID.search(head)) is not None:
        meta.gpu_pid = int(m.group(1))
    if (m := _HOST_API_PID.search(head)) is not None:
        meta.host_pid = int(m.group(1))
    derive(meta)
    if (m := _FIRST_TS.search(head[head.find(b'"traceEvents"') :])) is not None:
        meta.first_ts_us = Decimal(m.group(1).decode())
    return meta


def merge_tail(meta: KinetoMeta, tail: bytes) -> bool:
    """Add the keys written after traceEvents; False when the text does not end there."""
    extra = tail_meta(tail)
    if extra is None:
        return False
    top = meta.top
    for key, value in extra.items():
        if key not in top or (key == "deviceProperties" and not top.get(key)):
            top[key] = value
    meta.tail_pending = False
    return True


def derive(meta: KinetoMeta) -> None:
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
