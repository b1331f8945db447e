"""The HTML report's document: what the report shows, read from the workspace by the library.

Why a library package (issue 54): the renderer (render/report/) turns a finished document into
HTML and never opens a connection or runs an analysis, as compare's page renders compare()'s
document. `report_document(con, ...)` reads it (gather.py); its types are in document.py, the
aligned timeline's window and payload in timeline.py. The command and the API call
report_document, then render.report.write_html.
"""

from __future__ import annotations

from .. import comms, diagnose, mfu, whatif
from .document import PARTITION_COLUMNS, Part, ReportDocument, StepRange, parse_steps
from .gather import report_document, rows_of
from .timeline import MAX_TIMELINE_OPS, Timeline

# What the report reads: the library's documents it shows (diagnose, what-if, communication per
# dimension, MFU) and the stored tables its reads name; computed on first read, nothing more
# (tests/test_lazy_analysis.py checks it covers every name report_doc/ mentions).
READS = (
    *diagnose.READS, *whatif.READS, *comms.READS, *mfu.READS, "collective_waits", "comm_overlap_by_op",
    "idle_by_cause", "launch_stats", "longest_gaps", "memop_summary",
)  # fmt: skip

__all__ = [
    "MAX_TIMELINE_OPS",
    "PARTITION_COLUMNS",
    "READS",
    "Part",
    "ReportDocument",
    "StepRange",
    "Timeline",
    "parse_steps",
    "report_document",
    "rows_of",
]
