"""A plain table (column names and rows of Python values) that every renderer takes besides a DataFrame.

Why: importing pandas costs about half a second, more than a small command such as `summary` needs
in all. Its rows come from DuckDB (`description` and `fetchall`) or from a list of dicts, and the
renderers (terminal, Markdown, records/JSON, CSV) read either kind through `as_plain`, so a command
that builds a `PlainTable` never imports pandas, and one that hands a DataFrame prints the same text.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb
    import pandas as pd


def _numeric(values: Iterable[Any]) -> bool:
    """What pandas would call a numeric column of these values: ints and floats with missing
    values (None, NaN) among them, at least one of them a number or NaN; bools are not numbers
    (a column of all None is pandas' object column, not numeric)."""
    seen = False
    for v in values:
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return False
        seen = True
    return seen


# the DuckDB types `.df()` turns into numeric pandas columns
_NUMERIC_TYPE = re.compile(r"^(U?(TINY|SMALL|BIG|HUGE)?INT(EGER)?|FLOAT|DOUBLE|DECIMAL\(\d+,\d+\))$")


class PlainTable:
    """Rows of plain Python values under column names, in order (what a DuckDB query returns)."""

    __slots__ = ("_numeric", "columns", "rows")

    def __init__(
        self,
        columns: Sequence[str],
        rows: Iterable[Sequence[Any]] = (),
        numeric: Sequence[bool] | None = None,
    ):
        self.columns = [str(c) for c in columns]
        self.rows = [tuple(r) for r in rows]
        # per column, whether it holds numbers (a DataFrame's dtypes; else read from the values)
        self._numeric = list(numeric) if numeric is not None else None

    @classmethod
    def from_records(
        cls, records: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None
    ) -> PlainTable:
        """Rows from dicts: the columns are `columns`, else the keys in the order they first
        appear (as `pandas.DataFrame(records)` orders them); a key a row lacks is None."""
        if columns is None:
            seen: dict[str, None] = {}
            for rec in records:
                seen.update(dict.fromkeys(rec))
            columns = list(seen)
        return cls(columns, [tuple(rec.get(c) for c in columns) for rec in records])

    @classmethod
    def from_cursor(cls, cursor: duckdb.DuckDBPyConnection) -> PlainTable:
        """The result of the statement `cursor` (a DuckDB connection or cursor) just executed;
        numeric columns by their SQL type, as `.df()` types them (a column of only NULLs too)."""
        return cls.from_rows(cursor.description, cursor.fetchall())

    @classmethod
    def from_rows(cls, described: Sequence[Sequence[Any]], rows: Iterable[Sequence[Any]]) -> PlainTable:
        """Rows of a result whose DB-API `description` is `described` (see from_cursor)."""
        numeric = [_NUMERIC_TYPE.match(str(d[1])) is not None for d in described]
        return cls([d[0] for d in described], rows, numeric=numeric)

    @property
    def empty(self) -> bool:
        """No rows or no columns (as `DataFrame.empty`)."""
        return not self.rows or not self.columns

    def __len__(self) -> int:
        return len(self.rows)

    def is_numeric(self, i: int) -> bool:
        """Whether column `i` holds numbers (right-aligned on the terminal)."""
        if self._numeric is not None:
            return self._numeric[i]
        return _numeric(r[i] for r in self.rows)

    def select(self, columns: Sequence[str]) -> PlainTable:
        """These columns, in this order."""
        index = [self.columns.index(c) for c in columns]
        return PlainTable(columns, [tuple(r[i] for i in index) for r in self.rows])

    def records(self) -> list[dict[str, Any]]:
        """The rows as dicts (values as they are; `render.data.records` makes them JSON data)."""
        return [dict(zip(self.columns, r, strict=True)) for r in self.rows]

    def to_csv(self) -> str:
        """CSV with a header line, as `DataFrame.to_csv(index=False)` writes the same rows: `\\n`
        line ends, minimal quoting, missing values (None, NaN) as empty fields."""
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(self.columns)
        for row in self.rows:
            writer.writerow(["" if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in row])
        return buf.getvalue()


def as_plain(table: PlainTable | pd.DataFrame) -> PlainTable:
    """A DataFrame's rows as a PlainTable (values as `astype(object)` gives them; numeric columns
    by dtype, bools excluded), or the PlainTable itself. pandas is only touched for a DataFrame."""
    if isinstance(table, PlainTable):
        return table
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    numeric = [is_numeric_dtype(t) and not is_bool_dtype(t) for t in table.dtypes]
    return PlainTable(table.columns, table.astype(object).itertuples(index=False), numeric=numeric)
