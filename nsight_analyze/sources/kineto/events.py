"""The ijson path: the fallback parser, one Python call per event.

Why a module of its own: the fast path (pieces.py, duck_json.py) hands a file it cannot read
(not JSON, a piece cut inside a string, ...) to this parser, which streams the traceEvents
array with ijson (C backend) and dispatches each event on its `cat` into the row sets of
batches.py. It is the reference for what each field means (duck_json.py's SQL follows these
handlers), and its bad-input messages are the ones users see. `Decimal` keeps the times
exact: a µs literal becomes integer ns (`to_ns`) from its decimal text.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

from ..base import BadInput
from .batches import SYNC_KINDS, RowSets
from .duck_json import CUDA_DEVICE_TYPE, RANGE_COLUMNS, SHAPE_OPS
from .meta import READ_CHUNK, TAIL_BYTES, open_text

_STEP_NAME = re.compile(r"^ProfilerStep#\d+")
_SHAPE_NAME = re.compile(SHAPE_OPS)


def to_ns(value: Any) -> int | None:
    """µs (int or exact Decimal) -> integer ns, exactly; sub-ns digits round half-even."""
    if type(value) is int:
        return value * 1000
    if type(value) is Decimal:
        return int((value * 1000).to_integral_value())
    if isinstance(value, float):  # not produced by ijson's Decimal mode; kept for safety
        return round(value * 1000)
    return None


def to_int(value: Any) -> int | None:
    if type(value) is int:
        return value
    if type(value) is Decimal and value == value.to_integral_value():
        return int(value)
    return None


def to_dim(value: Any, i: int) -> int | None:
    if isinstance(value, list) and len(value) > i:
        return to_int(value[i])
    return None


def to_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)


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


class EventStream:
    """One file's traceEvents through ijson, each event into `rows` (the only Python loop)."""

    def __init__(self, rows: RowSets, path: Path):
        self.rows, self.path = rows, path
        self.reader: _TailKeeper | None = None
        # bound once: attribute look-ups per event are what this loop costs
        self.skipped, self.devices, self.host_pids = rows.skipped, rows.devices, rows.host_pids
        self.kernels, self.memops, self.api, self.sync = rows.kernels, rows.memops, rows.api, rows.sync
        self.nvtx, self.gpu_ann, self.comm = rows.nvtx, rows.gpu_ann, rows.comm
        self.threads, self.memory, self.ranges = rows.threads, rows.memory, rows.ranges
        self.bad = 0
        complete = self._complete
        self.on_step = complete(self.on_annotation)
        self.handlers = {
            "kernel": complete(self.on_kernel),
            "gpu_memcpy": complete(self.on_memop),
            "gpu_memset": complete(self.on_memop),
            "cuda_runtime": complete(self.on_api),
            "cuda_driver": complete(self.on_api),
            "cuda_sync": complete(self.on_sync),
            "user_annotation": self.on_step,
            "gpu_user_annotation": complete(self.on_gpu_annotation),
            "cpu_op": self.on_cpu_op,
            "cpu_instant_event": self.on_instant,
            "cuda_profiler_range": complete(self.on_profiler_range),
        }

    # -- per-event handlers (the only Python loop) ---------------------------------------------
    def _span(self, ev: dict) -> tuple[int, int] | None:
        start = to_ns(ev.get("ts"))
        dur = to_ns(ev.get("dur"))
        if start is None or dur is None:
            self.bad += 1
            return None
        return start, start + dur

    def _complete(self, handler: Callable[[dict, tuple[int, int], dict], None]) -> Callable[[dict], None]:
        """A handler of a complete event (ph X), called with the event's span and args once it has
        a span (an event without ts/dur counts as bad): the check every such handler needs."""
        span_of = self._span

        def on(ev: dict) -> None:
            span = span_of(ev)
            if span is not None:
                handler(ev, span, ev.get("args") or {})

        return on

    @staticmethod
    def _device(ev: dict, a: dict) -> int | None:
        """The GPU of a device-side event: args.device, else the pid (Kineto's GPU rows)."""
        device = to_int(a.get("device"))
        return to_int(ev.get("pid")) if device is None else device

    def on_kernel(self, ev: dict, span: tuple[int, int], a: dict) -> None:
        device = self._device(ev, a)
        if device is not None:
            self.devices[device] += 1
        grid, block = a.get("grid"), a.get("block")
        name = ev.get("name")
        corr = to_int(a.get("correlation"))
        stream = to_int(a.get("stream"))
        self.kernels.add(
            device,
            stream,
            span[0],
            span[1],
            name,
            corr,
            to_dim(grid, 0),
            to_dim(grid, 1),
            to_dim(grid, 2),
            to_dim(block, 0),
            to_dim(block, 1),
            to_dim(block, 2),
            to_int(a.get("registers per thread")),
        )
        if "Collective name" in a or (isinstance(name, str) and "nccl" in name):
            self._comm("kernel", a, corr, to_int(a.get("External id")), stream, span, name)

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
            to_text(a.get("Collective name")),
            to_text(a.get("dtype")),
            to_int(a.get("In msg nelems")),
            to_int(a.get("Out msg nelems")),
            to_text(a.get("In split size")),
            to_text(a.get("Out split size")),
            to_int(a.get("Group size")),
            to_text(a.get("Process Group Name")),
            to_text(a.get("Process Group Description")),
            to_text(a.get("Process Group Ranks")),
            to_int(a.get("Seq")),
        )

    def on_memop(self, ev: dict, span: tuple[int, int], a: dict) -> None:
        device = to_int(a.get("device"))
        if device is not None:
            self.devices[device] += 1
        self.memops.add(
            device,
            to_int(a.get("stream")),
            span[0],
            span[1],
            ev.get("name"),
            to_int(a.get("bytes")),
            to_int(a.get("correlation")),
        )

    def on_api(self, ev: dict, span: tuple[int, int], a: dict) -> None:
        pid = ev.get("pid")
        if type(pid) is int:
            self.host_pids[pid] += 1
        self.api.add(
            to_int(ev.get("tid")),
            span[0],
            span[1],
            ev.get("name"),
            to_int(a.get("correlation")),
            "runtime" if ev.get("cat") == "cuda_runtime" else "driver",
        )

    def on_sync(self, ev: dict, span: tuple[int, int], a: dict) -> None:
        kind = a.get("cuda_sync_kind") or ev.get("name")
        self.sync.add(
            to_int(a.get("device")),
            to_int(a.get("stream")),
            span[0],
            span[1],
            SYNC_KINDS.get(kind, "unknown"),
            to_int(a.get("correlation")),
        )

    def on_annotation(self, ev: dict, span: tuple[int, int], a: dict) -> None:
        self.nvtx.add(to_int(ev.get("tid")), span[0], span[1], to_text(ev.get("name")))

    def on_gpu_annotation(self, ev: dict, span: tuple[int, int], a: dict) -> None:
        self.gpu_ann.add(
            self._device(ev, a),
            to_int(ev.get("tid")),
            span[0],
            span[1],
            to_text(ev.get("name")),
            to_int(a.get("External id")),
        )

    def on_cpu_op(self, ev: dict) -> None:
        name = ev.get("name")
        if name == "record_param_comms":
            a = ev.get("args") or {}
            if "Collective name" in a:
                self._comm("cpu_op", a, None, to_int(a.get("External id")), None, None, None)
            self.skipped["cpu_op"] += 1
        elif isinstance(name, str) and name.startswith("ProfilerStep#") and _STEP_NAME.match(name):
            self.on_step(ev)
        elif isinstance(name, str) and _SHAPE_NAME.search(name):
            if not self.on_shape(ev, name):
                self.skipped["cpu_op"] += 1
        else:
            self.skipped["cpu_op"] += 1

    def on_shape(self, ev: dict, name: str) -> bool:
        """A softmax, matmul, convolution or attention op's Input Dims / Input type / Concrete Inputs
        (record_shapes) -> kineto_op_shapes; False when it has no shapes or no span (then it is a
        skipped cpu_op, as on the fast path)."""
        a = ev.get("args") or {}
        dims = a.get("Input Dims")
        start, dur = to_ns(ev.get("ts")), to_ns(ev.get("dur"))
        if dims is None or start is None or dur is None:
            return False
        types, concrete = a.get("Input type"), a.get("Concrete Inputs")
        compact = (",", ":")  # DuckDB's JSON text, so both paths store the same string
        self.rows.shapes.add(
            to_int(ev.get("tid")),
            start,
            start + dur,
            name,
            to_int(a.get("External id")),
            json.dumps(dims, separators=compact, default=str),
            None if types is None else json.dumps(types, separators=compact, default=str),
            None if concrete is None else json.dumps(concrete, separators=compact, default=str),
        )
        return True

    def on_instant(self, ev: dict) -> None:
        """[memory] events of CUDA devices -> memory_usage; other instant events are skipped."""
        if ev.get("name") != "[memory]":
            self.skipped["cpu_instant_event"] += 1
            return
        a = ev.get("args") or {}
        if to_int(a.get("Device Type")) != CUDA_DEVICE_TYPE:
            self.skipped["[memory] of a non-CUDA device"] += 1
            return
        ts = to_ns(ev.get("ts"))
        if ts is None:
            self.bad += 1
            return
        self.memory.add(
            to_int(a.get("Device Id")), ts, to_int(a.get("Total Allocated")), to_int(a.get("Total Reserved"))
        )

    def on_profiler_range(self, ev: dict, span: tuple[int, int], a: dict) -> None:
        self.ranges.add(
            span[0],
            span[1],
            to_text(ev.get("name")),
            *(to_int(a.get(metric)) for _, metric in RANGE_COLUMNS),
        )

    def on_metadata(self, ev: dict) -> None:
        if ev.get("name") == "thread_name":
            name = (ev.get("args") or {}).get("name")
            self.threads.add(to_int(ev.get("pid")), to_int(ev.get("tid")), to_text(name))
        else:
            self.skipped["metadata (ph M)"] += 1

    # -- the pass ------------------------------------------------------------------------------
    def events(self) -> Iterator[dict]:
        import ijson  # imported here so that sniff/probe work without it

        fh = _TailKeeper(open_text(self.path), TAIL_BYTES)
        self.reader = fh
        try:
            yield from ijson.items(fh, "traceEvents.item", buf_size=READ_CHUNK)
        finally:
            fh.close()

    def run(self) -> None:
        """Every event of the file into the row sets; BadInput says why the file cannot be read."""
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
        self.rows.bad += self.bad

    def tail(self) -> bytes | None:
        """The last bytes the pass read (the keys after traceEvents), once it ran."""
        return self.reader.tail() if self.reader else None
