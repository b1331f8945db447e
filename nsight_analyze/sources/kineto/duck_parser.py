"""The fast path's parsers: private in-memory DuckDB cursors that run duck_json's SQL on the pieces.

Why a module of its own: duck_json.py says what the events mean (its SQL and the row sets it
gives); this is the machinery that runs it: a private in-memory DuckDB (so parse errors never
abort the ingest's transaction), `WORKERS` cursors parsing pieces at once on a thread pool while
a reader thread takes the next pieces from pieces.py, the results handed back in the file's
order. A piece the fast reader cannot read exactly is parsed again in raw mode
(duck_json.SOURCE_RAW); one neither can read raises NoFastPath.
"""

from __future__ import annotations

import contextlib
import queue
import shutil
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from ...store.duck import OFFLINE_CONFIG, offline
from .duck_json import MACROS, SOURCE_FAST, SOURCE_RAW, NoFastPath, Piece, events_sql, split, sync_kind_cases

WORKERS = 2  # pieces parsed at once (read_json of one JSON array runs on one core)
THREADS = 1  # DuckDB threads per parse (one array is read by one thread anyway)
PARSE_MEMORY_LIMIT = "1GB"


class Parser:
    """Private in-memory DuckDB cursors that parse the pieces (files) of the traceEvents array.

    `dir` is the parser's private temporary folder: the pieces are written there (EventText)
    and each is deleted once parsed, or when reading stops before it is parsed; the folder
    goes at close()."""

    def __init__(self, sync_kinds: dict[str, str], workers: int = WORKERS):
        self.dir = Path(tempfile.mkdtemp(prefix="nsight_analyze_kineto_"))
        self.slots: queue.Queue[duckdb.DuckDBPyConnection] = queue.Queue()
        self.con = offline(duckdb.connect(":memory:", config=dict(OFFLINE_CONFIG)))
        try:
            self._setup(sync_kinds, workers)
        except BaseException:
            self.close()
            raise
        self.workers = workers

    def _setup(self, sync_kinds: dict[str, str], workers: int) -> None:
        self.con.execute(f"SET memory_limit = '{PARSE_MEMORY_LIMIT}'")
        self.con.execute("SET preserve_insertion_order = true")  # rows in the file's order
        self.con.execute(f"SET threads = {THREADS}")
        for macro in MACROS:
            self.con.execute(macro)
        self.sync_kinds = sync_kind_cases(sync_kinds)
        for _ in range(workers):
            self.slots.put(self.con.cursor())

    def close(self) -> None:
        while not self.slots.empty():
            self.slots.get_nowait().close()
        self.con.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def parse_all(self, pieces: Iterator[Path]) -> Iterator[Piece]:
        """Parse pieces, `workers` at a time, while the next ones are read; results in order.

        Raises duckdb.Error (a piece DuckDB cannot read) and whatever reading the pieces raises."""
        pending: queue.Queue[Future | BaseException | None] = queue.Queue(maxsize=self.workers)
        stop = threading.Event()
        with ThreadPoolExecutor(self.workers) as pool:
            reader = threading.Thread(target=self._read, args=(pieces, pool, pending, stop), daemon=True)
            reader.start()
            try:
                while (item := pending.get()) is not None:
                    if isinstance(item, BaseException):
                        raise item
                    yield item.result()
            finally:
                stop.set()
                while reader.is_alive():  # let a reader blocked on a full queue see `stop`
                    with contextlib.suppress(queue.Empty):
                        pending.get(timeout=0.05)
                reader.join()

    def _read(
        self, pieces: Iterator[Path], pool: ThreadPoolExecutor, pending: queue.Queue, stop: threading.Event
    ) -> None:
        try:
            for piece in pieces:
                if stop.is_set():  # the folder is shared by every file: leave nothing behind
                    piece.unlink(missing_ok=True)
                    return
                pending.put(pool.submit(self.parse, piece))
            pending.put(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which raises it
            pending.put(exc)
        finally:
            pieces.close()

    def parse(self, piece: Path) -> Piece:
        """Events of one piece: a file holding `[` whole events `]`, deleted once parsed."""
        cur = self.slots.get()
        try:
            try:
                wide = self._query(cur, piece, SOURCE_FAST)
                if pc.any(wide["lossy"]).as_py():
                    wide = self._query(cur, piece, SOURCE_RAW)
            except duckdb.Error:  # e.g. a non-object entry: the raw reader takes any JSON value
                try:
                    wide = self._query(cur, piece, SOURCE_RAW)
                except duckdb.Error as exc:
                    raise NoFastPath(str(exc).splitlines()[0]) from None
            return split(wide)
        finally:
            self.slots.put(cur)
            piece.unlink(missing_ok=True)

    def _query(self, cur: duckdb.DuckDBPyConnection, piece: Path, source: str) -> pa.Table:
        return cur.execute(events_sql(source, str(piece), self.sync_kinds)).to_arrow_table()
