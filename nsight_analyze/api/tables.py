"""The API's shared pieces: the path argument, rows as DataFrames (or Arrow tables), the findings table.

Why its own module: `Workspace` (api/__init__.py) and its method groups (api/findings.py, api/outputs.py)
return their tables the same way, and `diagnose --format csv` prints the findings table without
pandas; each needs these without importing the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from os import PathLike
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported lazily: `import nsight_analyze` stays light
    import pandas as pd

    from ..diagnose import Finding
    from ..render.table import PlainTable

PathArg = str | PathLike[str]


def frame(rows: Sequence[dict[str, Any]] | pd.DataFrame, arrow: bool, columns: list[str] | None = None):
    """A DataFrame of JSON-ready rows (the numbers the CLI's JSON prints), or its Arrow table."""
    import pandas as pd

    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows), columns=columns)
    if not arrow:
        return df
    import pyarrow as pa

    return pa.Table.from_pandas(df, preserve_index=False)


FINDING_COLUMNS = [
    "rank",
    "severity",
    "id",
    "title",
    "recoverable_ns_per_step",
    "recoverable_pct",
    "ranks",
    "steps",
    "summary",
    "recoverable_method",
]


def findings_table(findings: Sequence[Finding]) -> PlainTable:
    """One row per finding, in rank order (the `diagnose` overview, raw values), as plain rows:
    `diagnose --format csv` prints them without pandas."""
    from ..render.table import PlainTable

    return PlainTable(
        FINDING_COLUMNS,
        [
            (
                f.rank,
                f.severity,
                f.id,
                f.title,
                f.recoverable_ns_per_step,
                f.recoverable_pct,
                list(f.ranks),
                list(f.steps),
                f.summary,
                f.recoverable_method,
            )
            for f in findings
        ],
    )


def findings_frame(findings: Sequence[Finding]) -> pd.DataFrame:
    """`findings_table` as a DataFrame."""
    import pandas as pd

    return pd.DataFrame(findings_table(findings).rows, columns=FINDING_COLUMNS)
