"""Cutting the traceEvents array into pieces of whole events, and parsing them with DuckDB.

Why a module of its own: the fast path never holds the array in memory. One streaming pass
decompresses the file and writes its events into files of ~PIECE_BYTES each (EventText), cut
only between two events, so that DuckDB's JSON reader (duck_json.py) can parse each piece on
its own while the next one is being cut. This module knows the text of the array (where it
opens, where events end, where it closes), not what the events mean.
"""

from __future__ import annotations

import atexit
import contextlib
import re
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import closing
from itertools import count
from pathlib import Path
from typing import IO

from .batches import SYNC_KINDS
from .duck_json import NoFastPath, Piece
from .duck_parser import Parser
from .meta import READ_CHUNK, SNIFF_BYTES, TAIL_BYTES, head_meta, object_members, open_text, tail_meta

BLOCK_BYTES = 4 << 20  # decompressed text read at once by EventText
MAX_PIECE_FACTOR = 4  # no event boundary within this many pieces' bytes: leave the file to ijson

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

    def __init__(self, path: Path, piece_bytes: int, first_piece_bytes: int):
        """Pieces of `piece_bytes`; the first of `first_piece_bytes` (then doubling), so that
        the parsers start early."""
        self.path, self.piece_bytes = path, piece_bytes
        self.tail: bytes | None = None
        self.size = min(first_piece_bytes, piece_bytes)  # the next piece's

    def pieces(self, folder: Path) -> Iterator[Path]:
        """Write the pieces as `[events]` files in `folder`; yield each when it is complete."""
        with open_text(self.path) as fh:
            head = self._open_array(fh)
            if head[:1] == b"]":  # empty array
                self.tail = self._rest(fh, head)
                if tail_meta(self.tail) is None:
                    raise NoFastPath("the text after an empty traceEvents is not the object's end")
                return
            writer = PieceWriter(self, folder)
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
                if head_meta(bytes(buf[: at + 13])) is None:  # the key is not the top level's
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
            if more is not None and object_members(text, more.end()) is not None:
                return rest - 1
        raise NoFastPath("end of the traceEvents array not found")


class PieceWriter:
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


@contextlib.contextmanager
def parsed(text: EventText) -> Iterator[Iterator[Piece]]:
    """The pieces of a file parsed by DuckDB, in order (duck_json.Parser.parse_all)."""
    parser = shared_parser()
    with closing(parser.parse_all(text.pieces(parser.dir))) as pieces:
        yield pieces


_parser: Parser | None = None
_parser_lock = threading.Lock()
_piece_counter = count()


def shared_parser() -> Parser:
    """One parser for every file of the process, closed at exit.

    Why shared: a fresh in-memory DuckDB per file cost ~0.1 CPU-s of warm-up (allocator, page
    faults) per file. Files parsed at once (the read-ahead) share its cursors, so at most
    duck_parser.WORKERS pieces are parsed at a time, whatever the number of files."""
    global _parser
    with _parser_lock:
        if _parser is None:
            _parser = Parser(SYNC_KINDS)
            atexit.register(_parser.close)
        return _parser
