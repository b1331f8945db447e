"""The terminal: width-fitted tables and wrapped text.

Terminal output follows three rules, so every command reads the same:
- it fits the terminal: the width is `COLUMNS`, else the real terminal's, else 80; a table too
  wide for it is split into several (each repeating the first column), long names are elided
  and other text wraps (JSON and CSV keep every value in full);
- values are in human units, chosen by column name: `*_ns` durations as ns/µs/ms/s, `*_bytes`
  and `bytes` as B/KiB/MiB/GiB, `*_pct` as %, ids as plain integers, counts with thousands
  separators; timestamps (`start_ns`, `end_ns`, ...) stay integer nanoseconds, so they can be
  pasted into SQL; a missing value is always `UNKNOWN`;
- text from traces (kernel names, NVTX, paths) is shown literally: never read as rich markup,
  and control characters are escaped.
"""

from __future__ import annotations

import io
import os
import re
import sys
import textwrap
from typing import TYPE_CHECKING, Any

from .escape import ELLIPSIS, clean, clean_lines
from .table import PlainTable, as_plain
from .units import UNKNOWN, column_kind, format_value, heading

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_WIDTH = 80  # when neither COLUMNS nor a terminal says
MIN_WIDTH = 20
GAP = 2  # spaces between table columns
NAME_MIN = 24  # an elided name keeps at least this many characters
TEXT_MIN = 20  # a long unbreakable word in a text column is folded at this width
TEXT_LINES = 8  # text cells longer than about this many lines are elided
# Columns whose values are names (elided at the end) or paths (elided at the start).
NAME_COLUMNS = {"name", "kernel", "kernel_name", "demangled", "short_name", "nvtx", "range", "op_name"}
PATH_COLUMNS = {"path", "file", "source_path"}
_UNIT_RE = r"(?:ns|µs|ms|s|B|KiB|MiB|GiB|TiB|PiB)"
# A number and its unit are one token for width purposes ("943.5 ms" never splits).
_TOKEN = re.compile(rf"[-+]?[\d.,]+ {_UNIT_RE}(?![\w/])|\S+")
_NUMERIC_CELL = re.compile(r"^[-+]?\d")


# ------------------------------------------------------------------------------------------------
# Width


def terminal_width() -> int:
    """COLUMNS when set, else the terminal of stdout/stderr/stdin, else DEFAULT_WIDTH."""
    env = os.environ.get("COLUMNS", "").strip()
    if env.isdigit() and int(env) > 0:
        return max(MIN_WIDTH, int(env))
    for stream in (sys.stdout, sys.stderr, sys.stdin):
        try:
            if stream is not None and stream.isatty():
                return max(MIN_WIDTH, os.get_terminal_size(stream.fileno()).columns)
        except (AttributeError, OSError, ValueError):
            continue
    return DEFAULT_WIDTH


def _cell_len(text: str) -> int:
    from rich.cells import cell_len

    return cell_len(text)


def elide(text: str, width: int, at: str = "end") -> str:
    """Text cut to `width` terminal cells with an ellipsis at the end (or the start, for paths)."""
    if _cell_len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    if at == "start":
        out = text
        while _cell_len(out) > width - 1:
            out = out[1:]
        return ELLIPSIS + out
    out = text
    while _cell_len(out) > width - 1:
        out = out[:-1]
    return out.rstrip() + ELLIPSIS


def wrap(text: str, width: int | None = None, indent: str = "", hang: str | None = None) -> str:
    """Free text wrapped to the terminal: `indent` on the first line, `hang` on the others."""
    width = width or terminal_width()
    hang = indent if hang is None else hang
    out = []
    for paragraph in clean_lines(text):
        out.extend(
            textwrap.wrap(
                paragraph,
                width=max(width, len(hang) + 10),
                initial_indent=indent,
                subsequent_indent=hang,
                break_long_words=True,
                break_on_hyphens=False,
            )
            or [indent.rstrip()]
        )
    return "\n".join(out)


def echo(text: str = "", indent: str = "", hang: str | None = None, err: bool = False) -> None:
    """Print free text wrapped to the terminal width."""
    print(wrap(text, indent=indent, hang=hang) if text else "", file=sys.stderr if err else sys.stdout)


def wrap_sql(sql: str, width: int | None = None, indent: str = "", hang: str | None = None) -> str:
    """SQL wrapped at spaces outside string literals, so a wrapped query still runs as printed.

    A literal longer than the width is elided in the middle (the JSON and Markdown outputs keep
    the whole query)."""
    width = width or terminal_width()
    hang = indent if hang is None else hang
    words: list[str] = []
    for part in re.findall(r"'(?:[^']|'')*'|[^\s']+|\s+", " ".join(str(sql).split())):
        if part.isspace():
            words.append("")
        elif words:
            words[-1] += part
        else:
            words.append(part)
    words = [w for w in words if w]
    lines: list[str] = []
    line = indent
    room = max(width - len(hang), 10)
    for word in words:
        if len(word) > room:
            keep = max(room - 1, 2) // 2
            word = word[:keep] + ELLIPSIS + word[-(room - 1 - keep) :]
        if line.strip() and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = hang + word
        else:
            line = f"{line} {word}" if line.strip() else line + word
    lines.append(line)
    return "\n".join(clean(x) for x in lines)


# ------------------------------------------------------------------------------------------------
# Tables


def _cells(table: PlainTable) -> tuple[list[str], list[list[str]]]:
    cols = table.columns
    rows = [[format_value(v, c) for v, c in zip(row, cols, strict=True)] for row in table.rows]
    return cols, rows


def _style(col: str, values: list[str], dtype_numeric: bool) -> str:
    low = col.lower()
    if low in NAME_COLUMNS:
        return "name"
    if low in PATH_COLUMNS:
        return "path"
    if dtype_numeric or column_kind(col) != "plain":
        return "num"
    shown = [v for v in values if v and v != UNKNOWN]
    if shown and all(_NUMERIC_CELL.match(v) for v in shown):
        return "num"
    return "text"


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text) or [""]


class _Col:
    def __init__(self, header: str, values: list[str], style: str):
        self.header, self.values, self.style = header, values, style
        head_min = max(_cell_len(w) for w in (header.split() or [""]))
        want = max([_cell_len(v) for v in values] + [0])
        if style == "num":
            cell_min = max([_cell_len(t) for v in values for t in _tokens(v)] + [1])
        elif style in ("name", "path"):
            cell_min = min(want, NAME_MIN)
        else:
            cell_min = min(max([_cell_len(t) for v in values for t in v.split()] + [1]), TEXT_MIN)
        self.min = max(head_min, cell_min, 1)
        self.want = max(self.min, want)
        self.width = self.min


def _groups(cols: list[_Col], width: int, keys: int = 1) -> list[list[int]]:
    """Column indexes per table: all when they fit, else the first `keys` columns (what names a
    row) repeated in each."""
    keys = min(max(keys, 0), len(cols))
    if sum(c.min for c in cols) + GAP * (len(cols) - 1) <= width or len(cols) <= keys + 1:
        return [list(range(len(cols)))]
    head = list(range(keys))
    head_width = sum(cols[i].min for i in head) + GAP * max(keys - 1, 0)
    groups: list[list[int]] = []
    current, used = list(head), head_width
    for i in range(keys, len(cols)):
        need = (GAP if current else 0) + cols[i].min
        if used + need > width and len(current) > keys:
            groups.append(current)
            current, used = list(head), head_width
            need = (GAP if current else 0) + cols[i].min
        current.append(i)
        used += need
    groups.append(current)
    return groups


def _fit(cols: list[_Col], width: int) -> None:
    """Column widths: each at least its minimum; numbers get their full width first, then text
    and names share what is left."""
    room = width - GAP * (len(cols) - 1)
    for c in cols:
        c.width = min(c.min, max(room, 1))
    if sum(c.want for c in cols) <= room:
        for c in cols:
            c.width = c.want
        return
    extra = room - sum(c.width for c in cols)
    # Whole numbers or nothing (a half-widened cell wraps all the same), cheapest first.
    for c in sorted(cols, key=lambda c: c.want - c.width):
        if c.style == "num" and 0 < c.want - c.width <= extra:
            extra -= c.want - c.width
            c.width = c.want
    while extra > 0:
        short = [c for c in cols if c.style != "num" and c.width < c.want]
        if not short:
            break
        for c in sorted(short, key=lambda c: c.want - c.width, reverse=True):
            if extra <= 0:
                break
            c.width += 1
            extra -= 1


def _shown(c: _Col, value: str) -> str:
    if c.style == "name":
        return elide(value, c.width)
    if c.style == "path":
        return elide(value, c.width, at="start")
    if c.style == "text":
        return elide(value, c.width * TEXT_LINES - 2)
    return value


def _console(file: Any, width: int, tty: bool):
    from rich.console import Console

    return Console(
        file=file,
        width=width,
        force_terminal=tty,
        color_system="standard" if tty else None,
        highlight=False,
        markup=False,
        emoji=False,
        soft_wrap=False,
    )


def _rich_table(cols: list[_Col], tty: bool, rows: int | None = None):
    from rich import box
    from rich.table import Table
    from rich.text import Text

    rule = box.Box("    \n    \n -  \n    \n    \n    \n    \n    \n", ascii=True)
    table = Table(
        box=rule,
        show_edge=False,
        pad_edge=False,
        padding=(0, 0, 0, GAP - 1),  # plus the one-space divider: GAP between columns
        header_style="bold" if tty else "",
        expand=False,
    )
    for c in cols:
        table.add_column(
            Text(c.header),
            width=c.width,
            justify="right" if c.style == "num" else "left",
            no_wrap=c.style in ("name", "path"),
            overflow="fold",
        )
    for i in range(len(cols[0].values) if rows is None else rows):
        table.add_row(*[Text(_shown(c, c.values[i])) for c in cols])
    return table


def render_table(
    df: pd.DataFrame | PlainTable,
    title: str | None = None,
    width: int | None = None,
    tty: bool = False,
    keys: int = 1,
) -> str:
    """A table (a DataFrame or a PlainTable) as text that fits `width` (default: the terminal):
    split into several when the columns cannot all fit (each repeating the first `keys`
    columns), names elided, other text wrapped."""
    width = max(width or terminal_width(), MIN_WIDTH)
    table = as_plain(df)
    names, rows = _cells(table)
    cols = [
        _Col(heading(n), [r[i] for r in rows], _style(n, [r[i] for r in rows], table.is_numeric(i)))
        for i, n in enumerate(names)
    ]
    out: list[str] = []
    if title:
        out.append(wrap(title, width=width))
    if not cols:
        out.append("(no columns)")
        return "\n".join(out)
    groups = _groups(cols, width, keys)
    for n, group in enumerate(groups):
        if n:
            out.append("")
        part = [cols[i] for i in group]
        _fit(part, width)
        out.extend(_table_lines(part, width, tty))
    return "\n".join(out)


def _table_lines(cols: list[_Col], width: int, tty: bool) -> list[str]:
    """The lines of one fitted table. Rich lays out the heading (it wraps headers); body rows
    whose every cell fits its column on one line, the common case, are padded here, which is
    what rich would print for them (tests/test_terminal.py checks it on random tables) at a
    small part of its cost per cell. A cell that must wrap, or columns wider than the terminal
    (which rich narrows), send the table to rich whole."""
    shown = [[_shown(c, v) for v in c.values] for c in cols]
    fits = sum(c.width for c in cols) + GAP * (len(cols) - 1) <= width and all(
        _cell_len(v) <= c.width for c, vs in zip(cols, shown, strict=True) for v in vs
    )
    if not fits:
        return _rich_lines(cols, width, tty)
    pad = " " * GAP
    body = []
    for i in range(len(cols[0].values)):
        cells = []
        for c, vs in zip(cols, shown, strict=True):
            v = vs[i].rstrip() if c.style == "num" else vs[i]  # rich right-justifies stripped text
            fill = " " * (c.width - _cell_len(v))
            cells.append(fill + v if c.style == "num" else v + fill)
        body.append(pad.join(cells).rstrip())
    return _rich_lines(cols, width, tty, rows=0) + body


def _rich_lines(cols: list[_Col], width: int, tty: bool, rows: int | None = None) -> list[str]:
    """Rich's lines of the table (its first `rows` body rows; None: all)."""
    buf = io.StringIO()
    _console(buf, width, tty).print(_rich_table(cols, tty, rows))
    return [line.rstrip() for line in buf.getvalue().rstrip("\n").split("\n")]


def table_text(
    df: pd.DataFrame | PlainTable, title: str | None = None, width: int | None = None, keys: int = 1
) -> str:
    """Plain text (no colour) of `render_table`, for pipes, logs and indented sub-tables."""
    return render_table(df, title, width=width, keys=keys)


def print_table(df: pd.DataFrame | PlainTable, title: str | None = None, keys: int = 1) -> None:
    """Print `render_table` (coloured headings on a terminal)."""
    print(render_table(df, title, tty=sys.stdout.isatty(), keys=keys))
