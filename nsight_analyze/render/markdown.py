"""GitHub-flavoured Markdown (PR comments, CI summaries): tables and trace text.

Every value goes through `escape.markdown`, so a kernel or NVTX name cannot add a column, end a
row, open a link or a code span, or carry HTML into the page that renders the comment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .escape import code_block, markdown
from .table import PlainTable, as_plain
from .units import format_value

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["code_block", "markdown_cell", "markdown_table", "markdown_text"]


def markdown_text(value: Any) -> str:
    """Free text (a heading, a list item, a paragraph) shown literally."""
    return markdown(value)


def markdown_cell(value: Any, column: str | None = None) -> str:
    """One table cell: human units like the terminal (by column name when given), shown literally."""
    return markdown(format_value(value, column))


def markdown_table(
    df: pd.DataFrame | PlainTable, title: str | None = None, units_by_column: bool = True
) -> str:
    """A table (a DataFrame or a PlainTable; column names as they are), after a `### title` line.
    With `units_by_column` False, cells are formatted without their column name (numbers stay
    numbers, not durations)."""
    table = as_plain(df)
    cols = table.columns
    out = [f"### {markdown_text(title)}", ""] if title else []
    if not cols:
        return "\n".join(out + ["(no columns)"])
    out.append("| " + " | ".join(markdown_cell(c) for c in cols) + " |")
    out.append("|" + "|".join("---" for _ in cols) + "|")
    for row in table.rows:
        cells = [markdown_cell(v, c if units_by_column else None) for v, c in zip(row, cols, strict=True)]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)
