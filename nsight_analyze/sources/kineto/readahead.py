"""Read-ahead: the next file is parsed while the ingest inserts and commits this one.

Why a module of its own: the ingest loads its files one after another on one connection, and
on the fast path parsing a file (decompress, cut, DuckDB's JSON reader) costs about as much
as inserting its rows. `prefetch` starts the fast path's pipeline on a file in a worker of a
small thread pool; its parsed pieces wait in a bounded queue (READ_AHEAD_PIECES) until the
file's load takes them (`take`), so memory stays bounded however early the file was asked
for. A read-ahead that no load claims within READ_AHEAD_WAIT_S gives up and frees its pieces.
The pool lives while read-aheads may run: `cancel_all` (the ingest's `cancel_prefetch` when it
ends) stops them and shuts it down, and the interpreter's exit does the same.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from .duck_json import Piece
from .pieces import EventText, parsed

READ_AHEAD_FILES = 2  # files parsed ahead of their load (the ingest asks for the next one)
READ_AHEAD_PIECES = 8  # parsed pieces a read-ahead keeps before its load takes them
READ_AHEAD_WAIT_S = 600  # a read-ahead nobody takes for this long gives up (frees its memory)
THREAD_PREFIX = "kineto-read-ahead"

_END = None  # the last item of a read-ahead's queue (else a Piece, or the exception it raised)


class ReadAhead:
    """The fast path's pipeline on one file, run before its load(), which takes its pieces."""

    def __init__(self, text: EventText, pool: ThreadPoolExecutor):
        self.path, self.text = text.path, text
        self.queue: queue.Queue[Piece | BaseException | None] = queue.Queue(maxsize=READ_AHEAD_PIECES)
        self.cancelled = threading.Event()
        self.claimed = False  # a load takes the pieces: the read-ahead no longer gives up
        self.lock = threading.Lock()
        self.future = pool.submit(self._run)

    def _run(self) -> None:
        try:
            with parsed(self.text) as pieces:
                for piece in pieces:
                    if not self._put(piece):
                        return
            self._put(_END)
        except BaseException as exc:  # noqa: BLE001 - raised again in the load that takes it
            self._put(exc)

    def _put(self, item: Any) -> bool:
        """Hand one item to the load; False when no load will take more (cancelled, or none
        claimed the file within READ_AHEAD_WAIT_S). cancel() empties the queue, so a put
        blocked on a full queue returns and sees `cancelled`."""
        while not self.cancelled.is_set():
            try:
                self.queue.put(item, timeout=READ_AHEAD_WAIT_S)
            except queue.Full:
                with self.lock:
                    if not self.claimed:  # nobody came for it: free its memory
                        self.cancelled.set()
                        self._drain()
                        return False
                continue  # a load is taking the pieces, slowly: keep waiting for room
            return not self.cancelled.is_set()
        return False

    def claim(self) -> bool:
        """Reserve the pieces for one load; False when the read-ahead gave up or was cancelled."""
        with self.lock:
            if self.cancelled.is_set():
                return False
            self.claimed = True
            return True

    def pieces(self) -> Iterator[Piece]:
        try:
            while (item := self.queue.get()) is not _END:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            self.cancel()

    def cancel(self) -> None:
        """Stop the pipeline, wait until it has stopped and drop what it parsed (idempotent)."""
        self.cancelled.set()
        self._drain()
        self.future.cancel()  # not started yet: it never runs
        wait([self.future])
        self._drain()  # what a put blocked at cancel time handed over

    def _drain(self) -> None:
        with contextlib.suppress(queue.Empty):
            while True:
                self.queue.get_nowait()


_read_ahead: dict[Path, ReadAhead] = {}  # by path, oldest first; mutated, never rebound
_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_exit_hook = False


def _executor() -> ThreadPoolExecutor:
    """The pool, started on first use. One worker per read-ahead that may run at once: the
    READ_AHEAD_FILES waiting for their load, and one being taken by the current load."""
    global _pool, _exit_hook
    if _pool is None:
        _pool = ThreadPoolExecutor(READ_AHEAD_FILES + 1, thread_name_prefix=THREAD_PREFIX)
    if not _exit_hook:
        # The pool's threads are joined when the interpreter exits, before `atexit` handlers
        # run; a read-ahead blocked on its full queue would hold the exit for
        # READ_AHEAD_WAIT_S, so stop them first (threading runs these hooks before the join,
        # the last registered first: after concurrent.futures' own, which is imported above).
        register = getattr(threading, "_register_atexit", None)
        if register is not None:
            register(cancel_all)
        _exit_hook = True
    return _pool


def prefetch(text: EventText) -> None:
    """Start parsing `text.path` in the background for a load() of it that follows soon. At
    most READ_AHEAD_FILES files are read ahead (the oldest is dropped), each up to
    READ_AHEAD_PIECES parsed pieces."""
    with _lock:
        if text.path in _read_ahead:
            return
        while len(_read_ahead) >= READ_AHEAD_FILES:  # the oldest was not loaded after all
            _read_ahead.pop(next(iter(_read_ahead))).cancel()
        _read_ahead[text.path] = ReadAhead(text, _executor())


def take(path: Path) -> ReadAhead | None:
    """The read-ahead of `path`, claimed for its load, or None (none, or it gave up)."""
    with _lock:
        ahead = _read_ahead.pop(path, None)
    if ahead is not None and not ahead.claim():  # gave up waiting: parse again
        ahead.cancel()
        return None
    return ahead


def cancel_all() -> None:
    """Stop and forget every read-ahead no load() took, and shut the pool down."""
    global _pool
    with _lock:
        pending = list(_read_ahead.values())
        _read_ahead.clear()
        pool, _pool = _pool, None
    for ahead in pending:
        ahead.cancel()
    if pool is not None:
        pool.shutdown(wait=True)
