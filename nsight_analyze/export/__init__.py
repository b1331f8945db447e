"""Exports of a workspace for other tools: Parquet files (pandas, Polars, Spark, DuckDB elsewhere)
and a Chrome-trace JSON file (chrome://tracing, the Perfetto UI).

Why a package beside the renderers: both exports are the stored tables written out by DuckDB
itself (COPY, SQL-built JSON), never a Python loop per event, because jobs have millions of
events; the command (`commands/export.py`) only parses options and prints what was written.
The shared pieces live here: rank selection (`--ranks 0,2-3`) and atomic file writing (the
HTML report and compare's diff use it too).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import duckdb

from ..errors import UserError
from ..store.query_layer import statements

__all__ = ["parse_ranks", "select_ranks", "replace_atomically", "sql_path", "write_atomically"]

SQL = statements("export/export")

_RANK_ITEM = re.compile(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?")


def parse_ranks(text: str | None) -> list[int] | None:
    """`0,2-3` -> [0, 2, 3] (sorted, deduplicated); None (or blank) means every rank."""
    if text is None or not text.strip():
        return None
    ranks: set[int] = set()
    for item in text.split(","):
        m = _RANK_ITEM.fullmatch(item)
        if not m:
            raise UserError(f"bad --ranks {text!r}: use rank numbers and ranges, e.g. 0,2-3")
        first = int(m.group(1))
        last = int(m.group(2)) if m.group(2) is not None else first
        if last < first:
            raise UserError(f"bad --ranks {text!r}: the range {first}-{last} runs backwards")
        if last - first > 1_000_000:
            raise UserError(f"bad --ranks {text!r}: the range {first}-{last} is larger than any job")
        ranks.update(range(first, last + 1))
    return sorted(ranks)


def _spans(ranks: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2,5': how the error messages list the ranks a workspace has."""
    out: list[str] = []
    for r in ranks:
        if out and out[-1].split("-")[-1] == str(r - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{r}"
        else:
            out.append(str(r))
    return ",".join(out)


def select_ranks(con: duckdb.DuckDBPyConnection, wanted: list[int] | None) -> list[int]:
    """The workspace's ranks, or the `wanted` ones after checking each exists (a typo must not
    silently export nothing)."""
    have = [int(r) for (r,) in con.execute(SQL["workspace_ranks"]).fetchall()]
    if wanted is None:
        return have
    missing = sorted(set(wanted) - set(have))
    if missing:
        listed = _spans(have) if have else "none"
        raise UserError(f"no rank {_spans(missing)} in the workspace (its ranks: {listed})")
    return wanted


def sql_path(path: Path) -> str:
    """A path as the text between the quotes of a SQL string literal (each ' doubled): COPY ... TO
    takes no prepared parameter, so its statement holds '$path'."""
    return str(path).replace("'", "''")


def replace_atomically(tmp: Path, final: Path) -> None:
    """Move a finished temporary file onto its final name in one step, so a reader (or a killed
    export) never sees half a file under the final name."""
    os.replace(tmp, final)


def write_atomically(final: Path, text: str) -> None:
    """`text` (UTF-8) into `final` through a temporary file beside it: a failed write (a full
    disk) leaves neither half a file under the final name nor the temporary one."""
    tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        replace_atomically(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
