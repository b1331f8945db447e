"""The `corrupt-timing` capture finding: files whose trace times are corrupt for some rows.

Why a module of its own: one finding, one home; it reads the ingest's CORRUPT_TIMING warnings
(summary.CORRUPT_TIMING_SQL), the one list the summary shows too. A capture finding is a fact about
the trace that changes how every other finding must be read: it has no recoverable time and is
listed before the performance findings.
"""

from __future__ import annotations

from ..sources.base import CORRUPT_TIMING
from ..store.query_layer import statements
from ..summary import CORRUPT_TIMING_SQL
from .base import Ctx, Finding, Fix
from .declare import Doc, finding

SQL = statements("rules/corrupt_timing")


@finding(
    "corrupt-timing",
    doc=Doc(
        what=(
            "the ingest warned that some rows' times cannot be true: GPU operations, API calls or NVTX "
            "ranges that end before they start, nsys GPU work ending more than 1 s after the capture "
            "stopped (`files.warnings` starting `corrupt timing: `; `summary` prints them too). "
            "Severity medium: the windows, shares and every finding of those ranks are read from those "
            "rows as recorded"
        ),
        source="`files`, `ranks`",
        recoverable="none (capture)",
    ),
    reads=("steps",),
)
def corrupt_timing(ctx: Ctx) -> list[Finding]:
    """Files whose trace times are corrupt for some rows (the ingest's CORRUPT_TIMING warnings:
    rows that end before they start, GPU work ending long after the capture): every other
    finding reads the partition those rows distort, so this one comes first."""
    if not ctx.has("files", "ranks"):
        return []
    cut = len(CORRUPT_TIMING) + 1
    sql = SQL.sql("corrupt_timing_warnings", cut=cut, corrupt_timing=CORRUPT_TIMING_SQL)
    found = ctx.rows(sql)
    if not found:
        return []
    ranks = sorted({int(r) for f in found for r in f["ranks"]})
    files = len({f["path"] for f in found})
    return [
        ctx.finding(
            id="corrupt-timing",
            title=f"Corrupt timestamps in {files} file(s): the partition of rank(s) "
            f"{', '.join(map(str, ranks))} is distorted",
            kind="capture",
            severity="medium",
            summary=f"{len(found)} warning(s) of the ingest say some rows' times cannot be true ("
            + "; ".join(f["warning"] for f in found[:3])
            + "). The windows, idle time and shares of these ranks, and every finding built on them, "
            "are read from those rows as recorded.",
            ranks=ranks,
            steps=[],
            recoverable_ns_per_step=None,
            recoverable_method="not a performance problem: no recoverable time",
            metrics={"files": int(files), "warnings": int(len(found))},
            evidence=[
                ctx.evidence("files with corrupt timing", "The ingest's warnings (files.warnings).", sql)
            ],
            signals=[],
            fixes=[
                Fix(
                    "Capture again (a clean exit of the profiled process; a current nsys and driver); "
                    "or read these ranks' numbers only where the warned rows do not fall",
                    "a new capture costs a run",
                )
            ],
        )
    ]
