"""PyTorch-profiler (Kineto) JSON traces -> canonical tables: the source interface.

A Kineto trace is one JSON object: metadata keys (`distributedInfo`, `deviceProperties`,
`baseTimeNanoseconds`, ...) around one huge `traceEvents` array of Chrome-trace events.
Files of 1 GB and more exist, so the array is never held in memory. Two parsers read it:

* the fast path (default; pieces.py, duck_json.py): one streaming pass decompresses the file
  and cuts the array's text into pieces of whole events (`EventText`, ~32 MiB each); DuckDB's
  JSON reader parses each piece in C++ (two at a time, while the next is decompressed) and
  SQL maps the events to the row sets below. Memory is bounded by a few pieces, not the file.
* the ijson path (C backend; events.py), the fallback when DuckDB cannot read a piece (a
  non-JSON file, a cut that was not between two events): each event is dispatched on its
  `cat` into per-table row lists that are flushed every `BATCH_ROWS` rows as a pyarrow table
  (batches.py). Its bad-input messages are the ones users see.

Both give the same rows (tests/test_kineto_paths.py compares them on every shared trace);
rows go in by `INSERT ... SELECT` over registered Arrow streams. Python's memory is bounded
by pieces / batches, not the file size; what grows beyond that is DuckDB's buffer pool
holding the file's uncommitted rows (the ingest loads a file in one transaction), which
DuckDB's `memory_limit` caps. No Python loop runs per event on the fast path.

Times: Kineto writes `ts`/`dur` in µs, as integers or as decimals with up to 3 fractional
digits (ns resolution). Epoch-µs values near 1.7e15 have 19 significant digits in ns, more
than a double holds, so they are converted exactly to integer ns (`ts × 1000`) from their
decimal text: `decimal.Decimal` on the ijson path, integer arithmetic on the literal's
digits on the fast path (duck_json.py says how it gets the literal). Times stay on the
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
  [memory] instant events (CUDA)  -> memory_usage (Total Allocated / Total Reserved)
  cuda_profiler_range             -> kineto_profiler_ranges (CUPTI range-profiler FLOP, tensor-pipe
                                     and DRAM-byte counters), and ncu_peaks for the rank's GPU
                                     (the roofline's peaks)
  cpu_op softmax, matmul, conv and attention ops with Input Dims (record_shapes=True)
                                  -> kineto_op_shapes (duck_json.SHAPE_OPS)
Everything else (cpu_op, python_function, flows, other instant events, ...) is counted in
`files.skipped`.

The package, one module per job (each imports only modules listed above it):
  meta.py       sniff / probe: the top-level metadata, without parsing the events
  duck_json.py  the fast path's SQL: DuckDB's JSON reader on one piece -> Arrow row sets
  batches.py    the row sets of one file, batched as Arrow tables and inserted
  pieces.py     the array's text cut into pieces of whole events; the shared DuckDB parser
  events.py     the ijson fallback parser, one Python call per event
  readahead.py  the next file parsed in a thread pool while the ingest loads this one
  loader.py     one file's load: which parser, then what needs the whole file
The SQL of duck_json, batches and loader is in queries/sources/kineto/ (a statement file each).
This module holds the knobs (FAST_PATH, BATCH_ROWS, FIRST_PIECE_BYTES; duck_json.PIECE_BYTES)
and reads them at each call, so tests and benchmarks can set them on the package.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from ..base import LoadResult, Probe
from . import duck_json, loader, readahead
from .batches import BATCH_ROWS
from .events import _STEP_NAME as _STEP_NAME
from .loader import Loader as _Loader  # noqa: F401 - tests patch its _stream
from .meta import _GPU_EVENT_PID as _GPU_EVENT_PID
from .meta import FORMAT, SNIFF_BYTES, SUFFIXES, TAIL_BYTES, KinetoMeta, probe, read_meta, sniff
from .pieces import EventText
from .pieces import shared_parser as _shared_parser  # noqa: F401 - tests inspect its folder
from .readahead import _read_ahead as _read_ahead
from .readahead import take as _take_read_ahead

__all__ = [
    "BATCH_ROWS",
    "FAST_PATH",
    "FIRST_PIECE_BYTES",
    "FORMAT",
    "PARSES_IN_OWN_THREADS",
    "SNIFF_BYTES",
    "SUFFIXES",
    "TAIL_BYTES",
    "KinetoMeta",
    "cancel_prefetch",
    "load",
    "prefetch",
    "probe",
    "read_meta",
    "sniff",
]

PARSES_IN_OWN_THREADS = True  # the fast path's parsers: the ingest's own connection needs one thread
# Parse traceEvents with DuckDB's JSON reader (duck_json.py); False: the ijson path only
# (read at each load, so tests can compare both paths).
FAST_PATH = True
FIRST_PIECE_BYTES = 4 << 20  # then doubling up to duck_json.PIECE_BYTES: the parsers start early


def _event_text(path: Path) -> EventText:
    return EventText(path, duck_json.PIECE_BYTES, FIRST_PIECE_BYTES)


def load(
    con: duckdb.DuckDBPyConnection, path: Path, file_id: int, ranks: dict[int, int], probe: Probe
) -> LoadResult:
    """The file's rows into the canonical tables, inside the caller's transaction (loader.py)."""
    ahead = _take_read_ahead(path) if FAST_PATH else None
    try:
        return loader.load(
            con,
            path,
            ranks,
            probe,
            batch_rows=BATCH_ROWS,
            text=_event_text(path) if FAST_PATH and ahead is None else None,
            ahead=ahead,
            file_id=file_id,
        )
    finally:
        if ahead is not None:
            ahead.cancel()  # whatever the load did not take (it failed early): stopped, dropped


def prefetch(path: Path) -> None:
    """Start parsing `path` in the background for a load() of it that follows soon: the ingest
    calls this for its first file while it prepares them all, and for its next file before it
    loads the current one, so that parsing one file overlaps with inserting the other. Memory
    stays bounded: at most readahead.READ_AHEAD_FILES files are read ahead, each up to
    readahead.READ_AHEAD_PIECES parsed pieces."""
    if FAST_PATH:
        readahead.prefetch(_event_text(path))


def cancel_prefetch() -> None:
    """Stop and forget every read-ahead no load() took (the ingest calls this when it ends:
    a file prefetched early may have turned out a duplicate or failed its probe)."""
    readahead.cancel_all()
