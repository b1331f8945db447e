"""The report section "Communication by parallelism dimension": `comms(con, "dimension")`'s rows rendered.

Why its own module: the section is the report's view of issue 19's communication breakdown (the
same rows as `nsight-analyze comms --format json`), with the advice that fits each exposed
dimension and the diagnose findings that are its children (`exposed-comm-<dim>`).
Its data is the report document's (ReportDocument.comms: both breakdowns, read by report_doc).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from .html import esc, fmt, missing, notes, section, table

if TYPE_CHECKING:
    from ...report_doc.document import ReportDocument

SID, TITLE = "comms-dimension", "Communication by parallelism dimension"
DIMENSION_TABLE = [
    ("dimension", "dimension", "text"),
    ("communicators", "communicators", ""),
    ("kernels", "kernels", ""),
    ("total_ns", "total (over ranks)", "ns"),
    ("exposed_ns", "exposed (over ranks)", "ns"),
    ("exposed_pct", "exposed", "pct"),
    ("bytes", "bytes", ""),
    ("busbw_gbps", "bus bandwidth GB/s", ""),
    ("link", "link", "text"),
    ("link_peak_gbps", "link peak GB/s", ""),
    ("busbw_peak_pct", "of peak", "pct"),
]
COMMUNICATOR_TABLE = [
    ("group_key", "communicator", "text"),
    ("dimension", "dimension", "text"),
    ("basis", "why", "text"),
    ("ops", "operations", "text"),
    ("size", "size", ""),
    ("hosts", "hosts", ""),
    ("link", "link", "text"),
    ("total_ns", "total", "ns"),
    ("exposed_ns", "exposed", "ns"),
    ("busbw_gbps", "bus bandwidth GB/s", ""),
]


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(rows)


def comms_dimension(doc: ReportDocument) -> str:
    """The section: per-dimension table, advice per exposed dimension, the communicators, notes."""
    c = doc.comms
    if not c.ok:
        return section(SID, TITLE, missing(c.missing or ""))
    by_dim, by_comm = c.value["dimension"], c.value["communicator"]
    if not by_dim["rows"]:
        return section(SID, TITLE, missing("no NCCL kernels in the workspace"))
    body = [table(_frame(by_dim["rows"]), DIMENSION_TABLE, "comms-dimension-table")]
    findings = doc.findings.value if doc.findings.ok and doc.findings.value is not None else []
    found = {f.metrics.get("dimension"): f for f in findings if f.metrics.get("parent") == "exposed-comm"}
    items = []
    for a in by_dim["advice"]:
        f = found.get(a["dimension"])
        rec = (
            f" Diagnose ({esc(f.id)}): {esc(fmt(f.recoverable_ns_per_step, 'ns'))} per step recoverable "
            f"({esc(f.metrics.get('recoverable_source', ''))})."
            if f is not None
            else ""
        )
        items.append(
            f'<li data-dimension="{esc(a["dimension"])}"><b>{esc(a["dimension"])}</b> '
            f"({esc(fmt(a['exposed_ns'], 'ns'))} exposed over ranks): {esc(a['advice'])}{rec}</li>"
        )
    if items:
        body.append("<h3>Advice per exposed dimension</h3>")
        body.append('<ul class="notes">' + "".join(items) + "</ul>")
    if by_comm["rows"]:
        body.append("<h3>Communicators</h3>")
        body.append(table(_frame(by_comm["rows"]), COMMUNICATOR_TABLE, "comms-communicator-table", 200))
    body.append(notes(by_dim["notes"]))
    intro = (
        "NCCL kernels grouped by communicator, each named by its parallelism dimension (data parallel, "
        "FSDP, tensor, pipeline, expert; unknown when the trace cannot tell): their time and exposed time "
        "summed over ranks, bytes, and bus bandwidth against the link they run on (NVLink inside a node, "
        "the network across nodes). The same rows as `nsight-analyze comms --format json`."
    )
    return section(SID, TITLE, "".join(body), intro)
