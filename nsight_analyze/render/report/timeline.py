"""The aligned timeline's payload made safe for the page, and the order of its series.

Why here: the library (report_doc/timeline.py) picks the window and packs the operations as
integer arrays plus one table of unique names; those names and the series' categories are the
traced program's text, so the renderer escapes them (`render.escape.html`, cut at NAME_CHARS)
before they reach the page's JSON, where html.PAGE_JS builds the plotly traces in the browser.
"""

from __future__ import annotations

from typing import Any

from .. import palette
from ..escape import html as esc

# Trace text shown in the timeline's hover and the figures' labels is cut at this many characters.
NAME_CHARS = 160
# The order of the timeline's series (its legend). "memory" is memory-bound kernels and "copies"
# the memcpy / memset operations of category memory (the partition's memory_kernels_ns and
# copies_ns): both on the memory row, each in its colour, so that memory never reads as copies.
SERIES_ORDER = ("compute", "other", "memory", "copies", "comms", *palette.IDLE_CAUSES)


def escaped(payload: dict[str, Any]) -> dict[str, Any]:
    """The payload with its names and series keys (categories) escaped, in their order."""
    return {
        **payload,
        "names": [esc(n, NAME_CHARS) for n in payload["names"]],
        "series": {esc(cat, NAME_CHARS): s for cat, s in payload["series"].items()},
    }
