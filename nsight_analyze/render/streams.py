"""Standard output and error that cannot fail on a character their encoding lacks.

Why: the renderings use a few symbols (µs, ×, —, …, ·) and trace text may hold any character.
Where the locale's encoding is not UTF-8 (a `LANG=en_US.ISO-8859-1` shell, `PYTHONIOENCODING=ascii`,
a Windows console) Python raised UnicodeEncodeError at the first such character, so `summary`,
`ranks`, `diagnose` and the rest stopped with an error instead of a result. Such a stream now
writes our symbols in ASCII (`us`, `x`, `-`, `...`) and any other character it lacks as a
`\\uXXXX` escape (Python's backslashreplace), as the terminal already shows control characters
(`escape.clean`). JSON is ASCII already; `-o FILE` always writes UTF-8, the exact text.
"""

from __future__ import annotations

import codecs
import io
import sys

ERRORS = "nsight_analyze_ascii"

# the symbols the package itself prints, spelled in ASCII
ASCII_FOR = {
    "µ": "u",
    "×": "x",
    "—": "-",
    "–": "-",
    "−": "-",
    "…": "...",
    "·": ".",
    "§": "S",
    "²": "^2",
    "Δ": "d",
    "Σ": "sum",
    "→": "->",
    "≈": "~",
    "≥": ">=",
    "≤": "<=",
    "±": "+-",
    "ᵀ": "^T",
    "∪": "U",
    "∩": "^",
}


def _ascii_for(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    text = exc.object[exc.start : exc.end]
    out = "".join(ASCII_FOR.get(c) or c.encode("ascii", "backslashreplace").decode() for c in text)
    return out, exc.end


codecs.register_error(ERRORS, _ascii_for)


def _utf(encoding: str | None) -> bool:
    return (encoding or "").lower().replace("-", "").replace("_", "").startswith("utf")


def make_safe(*streams: object) -> None:
    """Give each text stream whose encoding is not a UTF one the ASCII fallback above."""
    for stream in streams or (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and not _utf(stream.encoding):
            stream.reconfigure(errors=ERRORS)
