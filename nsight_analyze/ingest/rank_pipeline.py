"""The rank-local step of an ingest's landed files, run while the next files load.

Why: loading an nsys export keeps about one core busy (DuckDB reads the SQLite file one
statement at a time), while the rank-local step of ranks already landed can use the other. On
16 ranks x 200k kernels (2 cores) the load took 7.3 s on 7.8 s of CPU and the rank step 10.4 s
on 18 s of CPU, one after the other; overlapped, the cores are busy for both at once.

How: a background thread on its own cursor (a DuckDB connection of the same database, with its
own TEMP schema) runs exactly what `analysis.refresh` runs per rank batch: the batch's canonical
rows shown under their usual names (`analysis.shadow_ranks`), then `analysis.rank_local_step`,
whose stored results it appends to `_staged_early_<name>`. `refresh` then takes those tables
as its staged results for these ranks (`Early`, `analysis._take_early`) and computes only the rest.

Why the results equal refresh's own: the rank-local step reads only a rank's canonical rows and
`settings` (analysis.rank_local_step), a file's rows are final when its transaction commits (a
later file's classification only touches the kernels it loads), and the thread starts after the
ingest stored its rules and settings. `refresh` still takes them only when the global stamp
(queries, settings, rules) equals the one they were computed under, and any error here
discards them all: `refresh` then computes everything and raises what it raises.
"""

from __future__ import annotations

import queue
import threading

import duckdb

from .. import analysis
from ..analysis import EARLY
from ..store import query_layer, schema
from ..store.duck import bound_memory, main_schema
from ..store.live_layer import settings_as_variables
from .rank_early import Early


class RankPipeline:
    """`submit(ranks, events)` after a file commits; `finish()` when the loading is over.

    As a context manager it stops the thread (interrupting the running query) when the
    loading raises, so the ingest's connection is never closed under it."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        batch_events: int = analysis.BATCH_EVENTS,
        tables: set[str] | None = None,
    ):
        """`tables`: the stored results to compute (None: every one)."""
        names = [n for n in query_layer.stored("rank") if tables is None or n in tables]
        self.early = Early(analysis.global_stamp(con), EARLY, names)
        self._wanted = tables
        self.batch_events = batch_events
        self._cur = con.cursor()
        bound_memory(self._cur)  # the analysis's cap (a database setting): the load shares it
        settings_as_variables(self._cur)
        self._main = main_schema(self._cur)
        self._tables = schema.owned_by(self._cur, "rank")
        self._queue: queue.Queue[tuple[list[int], int] | None] = queue.Queue()
        self._pending: tuple[list[int], int] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, name="rank-pipeline", daemon=True)
        self._thread.start()

    def submit(self, ranks: list[int], events: int) -> None:
        if ranks:
            self._queue.put((ranks, events))

    def finish(self) -> Early:
        """Wait for every submitted rank; what was computed."""
        self._queue.put(None)
        self._thread.join()
        self._cur.close()
        return self.early

    def __enter__(self) -> RankPipeline:
        return self

    def __exit__(self, kind, value, tb) -> None:
        if kind is None:
            return
        self.early.failed = True
        self._stop.set()
        self._queue.put(None)
        while self._thread.is_alive():  # an interrupt between two queries of a batch misses
            self._cur.interrupt()
            self._thread.join(0.05)
        self._cur.close()

    def _next_batch(self) -> tuple[list[int], bool]:
        """The ranks waiting, up to batch_events events (at least one file's); and whether the
        loading has ended."""
        item = self._pending or self._queue.get()
        self._pending = None
        if item is None:
            return [], True
        ranks, total = list(item[0]), item[1]
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return ranks, False
            if item is None:
                return ranks, True
            if total + item[1] > self.batch_events:
                self._pending = item  # the first of the next batch
                return ranks, False
            ranks += item[0]
            total += item[1]

    def _work(self) -> None:
        ended = False
        while not ended and not self._stop.is_set():
            batch, ended = self._next_batch()
            if not batch:
                continue
            try:
                made = analysis.shadow_ranks(self._cur, batch, self._tables)
                try:
                    staging = analysis.Staging(self._main, batch, create=not self.early.ranks, prefix=EARLY)
                    made += analysis.rank_local_step(self._cur, staging, tables=self._wanted)
                finally:
                    analysis.drop_made(self._cur, made)
            except BaseException:  # noqa: BLE001 - refresh recomputes these ranks and raises it
                self.early.failed = True
                return
            self.early.ranks += batch
