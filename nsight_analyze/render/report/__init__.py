"""Self-contained HTML report: one file, plotly.js inlined, readable offline.

Why: performance engineers on air-gapped clusters need to hand one file to a colleague (or CI)
that answers where step time goes, per rank, with the evidence; no server, no CDN. The report
renders only what the library returns (summary, views, MFU, diagnose); see `collect`.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from ... import __version__
from ...errors import UserError
from ...export import write_atomically
from . import comms_section, figures, headline_section, sections, timeline, whatif_section
from .collect import StepRange, collect
from .html import page

if TYPE_CHECKING:
    from ...mfu_options import MfuOptions

__all__ = ["StepRange", "parse_steps", "render_report", "write_report"]


def parse_steps(text: str | None) -> StepRange | None:
    """`A:B` (inclusive, either end may be left out) or a single step `N`; None for no filter."""
    if text is None or text.strip() == "":
        return None
    m = re.fullmatch(r"\s*(\d*)\s*(?::\s*(\d*)\s*)?", text)
    if not m or (m.group(1) == "" and not m.group(2)):
        raise UserError(f"bad --steps {text!r}: use A:B (inclusive step numbers, e.g. 3:7, 5:, :4) or N")
    first = int(m.group(1)) if m.group(1) else None
    last = int(m.group(2)) if m.group(2) else (first if m.group(2) is None and ":" not in text else None)
    if first is not None and last is not None and last < first:
        raise UserError(f"bad --steps {text!r}: the last step {last} is before the first {first}")
    return StepRange(first, last)


def _require_steps(con: duckdb.DuckDBPyConnection, steps: StepRange) -> None:
    """--steps must select a step the workspace has (as `export --steps`): a range past the last
    step gave a page of empty sections whose headline read "no steps, 0 ranks"."""
    if con.execute(f"SELECT EXISTS (SELECT 1 FROM steps WHERE {steps.sql()})").fetchone()[0]:
        return
    have = con.execute("SELECT min(step), max(step) FROM steps WHERE step IS NOT NULL").fetchone()
    if have[0] is None:
        raise UserError(f"--steps '{steps}': the workspace has no steps (the capture is one window)")
    raise UserError(f"--steps '{steps}': no such step in the workspace (its steps: {have[0]}-{have[1]})")


def render_report(
    con: duckdb.DuckDBPyConnection,
    steps: StepRange | str | None = None,
    mfu_options: MfuOptions | dict[str, Any] | None = None,
    timeline_budget: int = timeline.MAX_TIMELINE_OPS,
    job_note: str | None = None,
) -> str:
    """The report as one HTML string; `job_note` (job_scope.JobScope.note) names the job shown."""
    if isinstance(steps, str):
        steps = parse_steps(steps)
    if steps is not None:
        _require_steps(con, steps)
    inp = collect(con, steps, mfu_options)
    tl = timeline.build(con, steps, budget=timeline_budget)
    figs: dict[str, Any] = {}
    part = sections.partition_frame(inp)
    body = "".join(
        [
            headline_section.headline(inp, part, figs),
            sections.partition(part, figs, steps),
            sections.timeline(tl, figs),
            sections.heatmap(inp, figs),
            sections.overlap(inp, part, figs),
            comms_section.comms_dimension(inp),
            whatif_section.whatif(inp),
            sections.kernels(inp, figs),
            sections.capture(inp),
            sections.definitions(),
        ]
    )
    n_ranks = len(part.value) if part.ok else 0
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    subtitle = f"{n_ranks} rank(s) · generated {stamp} by nsight-analyze {__version__}"
    if job_note:  # page() escapes the subtitle
        subtitle = f"{job_note} · {subtitle}"
    return page(
        "nsight-analyze report",
        subtitle,
        list(sections.SECTIONS),
        body,
        figs,
        figures.plotly_js(),
    )


def write_report(
    con: duckdb.DuckDBPyConnection,
    out_path: str | Path,
    steps: StepRange | str | None = None,
    mfu_options: MfuOptions | dict[str, Any] | None = None,
    job_note: str | None = None,
) -> Path:
    """Write the self-contained HTML report for an open workspace; return its path."""
    out = Path(out_path)
    if out.is_dir():  # the temporary file went into its parent, then the rename failed
        raise UserError(
            f"cannot write {out}: it is a folder; give the report's file name, e.g. {out / 'report.html'}"
        )
    if not out.parent.is_dir():
        raise UserError(f"cannot write {out}: folder {out.parent} does not exist")
    text = render_report(con, steps, mfu_options, job_note=job_note)
    write_atomically(out, text)
    return out
