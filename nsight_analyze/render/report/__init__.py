"""Self-contained HTML report: one file, plotly.js inlined, readable offline.

Why: performance engineers on air-gapped clusters need to hand one file to a colleague (or CI)
that answers where step time goes, per rank, with the evidence; no server, no CDN. The page
renders a finished document (report_doc.report_document's: summary, views, MFU, diagnose, the
timeline), as compare's page renders compare()'s; it opens no connection and runs no analysis.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import UserError
from ...export import write_atomically
from . import comms_section, figures, headline_section, sections, whatif_section
from .html import page

if TYPE_CHECKING:
    from ...report_doc.document import ReportDocument

__all__ = ["check_output", "render_html", "write_html"]


def render_html(doc: ReportDocument) -> str:
    """The report of `doc` as one HTML string (`doc.job_note` names the job shown, under the title)."""
    figs: dict[str, Any] = {}
    part = doc.rank_partition
    body = "".join(
        [
            headline_section.headline(doc, part, figs),
            sections.partition(part, figs, doc.steps, doc.partition_columns),
            sections.timeline(doc.timeline, figs),
            sections.heatmap(doc, figs),
            sections.overlap(doc, part, figs),
            comms_section.comms_dimension(doc),
            whatif_section.whatif(doc),
            sections.kernels(doc, figs),
            sections.capture(doc),
            sections.definitions(),
        ]
    )
    n_ranks = len(part.value) if part.ok else 0
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    subtitle = f"{n_ranks} rank(s) · generated {stamp} by nsight-analyze {doc.version}"
    if doc.job_note:  # page() escapes the subtitle
        subtitle = f"{doc.job_note} · {subtitle}"
    return page(
        "nsight-analyze report",
        subtitle,
        list(sections.SECTIONS),
        body,
        figs,
        figures.plotly_js(),
    )


def check_output(out_path: str | Path) -> Path:
    """The report's file, refused (UserError) where it cannot be written: called before the
    document is read, so a bad -o fails at once."""
    out = Path(out_path)
    if out.is_dir():  # the temporary file went into its parent, then the rename failed
        raise UserError(
            f"cannot write {out}: it is a folder; give the report's file name, e.g. {out / 'report.html'}"
        )
    if not out.parent.is_dir():
        raise UserError(f"cannot write {out}: folder {out.parent} does not exist")
    return out


def write_html(doc: ReportDocument, out_path: str | Path) -> Path:
    """Write the self-contained HTML report of `doc` (complete or not at all); return its path."""
    out = check_output(out_path)
    write_atomically(out, render_html(doc))
    return out
