"""Standard output and error that cannot fail on a character their encoding lacks.

Why: the renderings use a few symbols (µs, ×, —, …, ·) and trace text may hold any character.
Where the locale's encoding is not UTF-8 (a `LANG=en_US.ISO-8859-1` shell, `PYTHONIOENCODING=ascii`,
a Windows console) Python raised UnicodeEncodeError at the first such character, so `summary`,
`ranks`, `diagnose` and the rest stopped with an error instead of a result. Such a stream now
writes our symbols in ASCII (`us`, `x`, `-`, `...`) and any other character it lacks as a
`\\uXXXX` escape (Python's backslashreplace), as the terminal already shows control characters
(`escape.clean`). JSON is ASCII already; `-o FILE` always writes UTF-8, the exact text.

A name of a file that is not UTF-8 (a latin-1 name on a Linux filesystem) reaches the output as
lone surrogates, which no encoding writes: every stream, and `-o FILE`, shows those bytes as
`\\xff`, the spelling the workspace stores (store/duck.path_text).
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
    out = "".join(_spelled(c) for c in exc.object[exc.start : exc.end])
    return out, exc.end


def _spelled(char: str) -> str:
    if "\udc80" <= char <= "\udcff":  # a byte of a file name that is not UTF-8 (os.fsdecode's)
        return f"\\x{ord(char) - 0xDC00:02x}"
    return ASCII_FOR.get(char) or char.encode("ascii", "backslashreplace").decode()


codecs.register_error(ERRORS, _ascii_for)


def make_safe(*streams: object) -> None:
    """Give each text stream the fallback above: a UTF one meets only the bytes of file names
    that are not UTF-8 (shown as `\\xff`, as the database holds them: store/duck.path_text)."""
    for stream in streams or (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors=ERRORS)
