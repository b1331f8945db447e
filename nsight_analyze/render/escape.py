"""The one place trace text is made safe for an output: the terminal, Markdown, HTML, `<script>`.

Why one module: kernel names, NVTX ranges, host activities and paths come from the traced program
and may hold anything (`|`, `<script>`, backticks, newlines, terminal escape sequences). Every
renderer escapes through these functions, so a name is shown literally, in every format, the same
way, and `tests/test_hostile_names.py` checks each output against them. JSON and CSV are data:
they keep the exact text (their own quoting makes it safe).
"""

from __future__ import annotations

import html as _html
import json
import re
from typing import Any

from ..plain import missing

# C0 and C1 control characters except tab and newline (which are handled as whitespace).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_MARKDOWN_SPECIAL = re.compile(r"([\\`\[\]|])")
_BACKTICKS = re.compile(r"`+")
ELLIPSIS = "…"


# ------------------------------------------------------------------------------------------------
# Terminal


def clean(text: Any) -> str:
    """Trace text made safe to print: control characters (terminal escapes) shown escaped."""
    text = str(text)
    if not _CONTROL.search(text):
        return text
    text = text.replace("\t", " ").replace("\n", " ")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def clean_lines(text: Any) -> list[str]:
    """Text split into lines, each made safe to print."""
    return [clean(line) for line in str(text).split("\n")]


# ------------------------------------------------------------------------------------------------
# Markdown (GitHub-flavoured: PR comments, CI summaries)


def markdown(text: Any) -> str:
    """Text that stays one inline run of literal text in Markdown, in a table cell or a line.

    Control characters are escaped as on the terminal; newlines become spaces (a line break would
    end the table row or open a new block); `<`, `>` and `&` become entities (no HTML, no
    autolinks); backslash, backticks, brackets and `|` are backslash-escaped (no code span, no
    link, no extra table column)."""
    s = clean(text).replace("\r", " ").replace("\n", " ")
    s = _html.escape(s, quote=False)
    return _MARKDOWN_SPECIAL.sub(r"\\\1", s)


def code_block(text: str, lang: str = "") -> str:
    """A fenced code block that its text cannot close: the fence is longer than any backtick run."""
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


# ------------------------------------------------------------------------------------------------
# HTML


def html(value: Any, limit: int | None = None) -> str:
    """Any value as inert HTML text (attribute-safe); missing values as ''. Also right for strings
    inside plotly figures, whose labels are HTML-like (plotly renders entities). Control
    characters are shown escaped, as on the terminal. With `limit`, text longer than that is cut
    with an ellipsis first."""
    if missing(value):
        return ""
    s = str(value)
    if limit is not None and len(s) > limit:
        s = s[: limit - 1] + ELLIPSIS
    return _html.escape(clean(s), quote=True)


def script_json(obj: Any, default: Any = str) -> str:
    """JSON that cannot end a <script> block or open markup, whatever strings it carries: `<`, `>`
    and `&` are written as JSON escapes (so `</script>`, `<!--` and `]]>` cannot appear)."""
    text = json.dumps(obj, separators=(",", ":"), default=default, allow_nan=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
