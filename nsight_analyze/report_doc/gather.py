"""Read the report document from the workspace: summary, stored tables, workspace info, MFU, findings.

Why one place: every section's data comes through here from the stored analysis tables and the
library's functions (plain imports: a bug fails the report and its tests instead of turning into
a note), so the renderer needs no connection. Only a number the data cannot support (MFU without
model FLOPs or a known peak, comms without NCCL) becomes a one-line reason the page shows.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import duckdb
import pandas as pd

from .. import __version__
from ..errors import UserError
from ..store.query_layer import statements
from .document import PARTITION_COLUMNS, Part, ReportDocument, StepRange, parse_steps
from .timeline import MAX_TIMELINE_OPS
from .timeline import build as build_timeline

if TYPE_CHECKING:
    from ..mfu.options import MfuOptions

# Environment names whose values the report never shows, even if a workspace (older ingest,
# hand-edited) holds them: the env table is redacted at ingest; this is the second fence.
SECRET_NAME = re.compile(
    r"(?i)(?:key|token|secret|passw|pwd|credential|auth|cookie|session|private|cert|sig)"
)
SECRET_VALUE = re.compile(r"(?i)^(?:sk-|ghp_|gho_|github_pat_|xox[bap]-|akia|aiza|eyj)|[A-Za-z0-9+/=_-]{32,}")

TOP_KERNELS = 20

SQL = statements("report_doc/gather")


def view(con: duckdb.DuckDBPyConnection, name: str, sql: str | None = None) -> Part:
    """Rows of a stored table or live view of the workspace (or of a query over it)."""
    return Part(con.execute(sql or f"SELECT * FROM {name}").df())


def _mfu(con: duckdb.DuckDBPyConnection, options: MfuOptions) -> Part:
    """MFU/HFU, or why they cannot be known from this workspace."""
    from ..mfu import hfu_mfu_summary

    try:
        return Part(hfu_mfu_summary(con, options))
    except UserError as exc:
        return Part(missing=str(exc))


def safe_env(con: duckdb.DuckDBPyConnection) -> Part:
    """The allow-listed env table, minus anything that still looks like a secret."""
    part = view(con, "env", "SELECT file_id, name, value FROM env ORDER BY file_id, name")
    if not part.ok:
        return part
    df = part.value
    keep = ~df["name"].fillna("").str.contains(SECRET_NAME) & ~df["value"].fillna("").str.contains(
        SECRET_VALUE
    )
    return Part(df[keep].reset_index(drop=True))


def _partition_of_steps(con: duckdb.DuckDBPyConnection, steps: StepRange) -> Part:
    """Per rank, the time_partition step rows of the chosen steps added up (parts still tile)."""
    sums = ", ".join(SQL.sql("step_part_sum", column=c) for c in PARTITION_COLUMNS if c != "overlap_pct")
    return view(con, "time_partition", SQL.sql("steps_partition", sums=sums, steps=steps.sql()))


def comms_breakdown(con: duckdb.DuckDBPyConnection) -> Part:
    """Both communication breakdowns (by dimension, by communicator), or why they are missing."""
    from ..comms import comms

    try:
        return Part({"dimension": comms(con, "dimension"), "communicator": comms(con, "communicator")})
    except UserError as exc:
        return Part(missing=str(exc))


def rows_of(summary: Any) -> list[dict] | None:
    """The per-rank (or per-step) records of a summary() result, wherever the dict keeps them."""
    if isinstance(summary, list):
        return summary if all(isinstance(r, dict) for r in summary) else None
    if not isinstance(summary, dict):
        return None
    for key in ("rows", "ranks", "by_rank", "partition", "steps", "by_step"):
        if isinstance(summary.get(key), list) and all(isinstance(r, dict) for r in summary[key]):
            return summary[key]
    return None


def partition_frame(doc: ReportDocument) -> Part:
    """Per-rank partition: summary(con, by='rank') records when present, else the time_partition view."""
    if doc.steps:  # summary() covers the whole capture; the chosen steps' rows are summed instead
        return doc.partition
    rows = rows_of(doc.summary_rank.value) if doc.summary_rank.ok else None
    if rows and all("rank" in r and "window_ns" in r for r in rows):
        df = pd.DataFrame(rows)
        if "step" in df:
            df = df[df["step"].isna()] if df["step"].isna().any() else df
        return Part(df.sort_values("rank").reset_index(drop=True))
    return doc.partition


def require_steps(con: duckdb.DuckDBPyConnection, steps: StepRange) -> None:
    """--steps must select a step the workspace has (as `export --steps`): a range past the last
    step gave a page of empty sections whose headline read "no steps, 0 ranks"."""
    if con.execute(SQL.sql("steps_chosen", steps=steps.sql())).fetchone()[0]:
        return
    have = con.execute("SELECT min(step), max(step) FROM steps WHERE step IS NOT NULL").fetchone()
    if have[0] is None:
        raise UserError(f"--steps '{steps}': the workspace has no steps (the capture is one window)")
    raise UserError(f"--steps '{steps}': no such step in the workspace (its steps: {have[0]}-{have[1]})")


def _whatif(con: duckdb.DuckDBPyConnection, doc: ReportDocument) -> None:
    """The whole-job what-if rows (or why there are none), the slow ranks' causes and their evidence."""
    from ..whatif import SCENARIO_TEXT, empty_reason, evidence

    doc.whatif = view(
        con, "whatif", "SELECT * FROM whatif WHERE step IS NULL ORDER BY job, gain_ns DESC, scenario"
    )
    if doc.whatif.ok and doc.whatif.value.empty:  # unknown, and why (never "nothing to gain")
        doc.whatif = Part(missing=f"unknown: {empty_reason(con)}")
    doc.attribution = view(
        con, "rank_attribution", "SELECT * FROM rank_attribution WHERE step IS NULL ORDER BY job, rank"
    )
    if doc.attribution.ok:
        doc.attribution_evidence = [
            evidence(r) if isinstance(r.get("cause"), str) else None
            for r in doc.attribution.value.to_dict("records")
        ]
    doc.whatif_scenarios = dict(SCENARIO_TEXT)


def report_document(
    con: duckdb.DuckDBPyConnection,
    steps: StepRange | str | None = None,
    mfu_options: MfuOptions | dict[str, Any] | None = None,
    timeline_budget: int = MAX_TIMELINE_OPS,
    job_note: str | None = None,
) -> ReportDocument:
    """Read every stored analysis the report shows (and MFU/HFU where the data supports them).

    `steps` ('A:B' or a StepRange) must name steps the workspace has (UserError otherwise);
    `job_note` (job_scope.JobScope.note) names the job shown."""
    from ..diagnose import diagnose
    from ..gpus import stated_gpu
    from ..mfu import MfuOptions
    from ..mfu.rows import shared_peaks
    from ..no_data import has_gpu_operations, held_instead
    from ..store.duck import on_own_cursor
    from ..store.workspace_info import workspace_info
    from ..summary import summary, top_kernels

    if isinstance(steps, str):
        steps = parse_steps(steps)
    if steps is not None:
        require_steps(con, steps)
    mfu_options = MfuOptions.of(mfu_options)
    stated = stated_gpu(mfu_options.gpu) if mfu_options.gpu else contextlib.nullcontext()
    # a --gpu reaches diagnose's rules too (as `diagnose --gpu`); diagnose runs on its own cursor
    # beside the other reads (its many small queries leave a core idle), in this context
    with shared_peaks(), stated, ThreadPoolExecutor(max_workers=1) as pool:
        diagnosed = pool.submit(contextvars.copy_context().run, on_own_cursor, con, diagnose)
        doc = ReportDocument(steps=steps, job_note=job_note, version=__version__)
        doc.info = Part(workspace_info(con))
        doc.summary_rank = Part(summary(con, by="rank"))
        if steps:
            doc.partition = _partition_of_steps(con, steps)
        else:
            doc.partition = view(
                con, "time_partition", "SELECT * FROM time_partition WHERE step IS NULL ORDER BY rank"
            )
        doc.rank_step = view(
            con, "time_partition", SQL.sql("rank_step_partition", steps=(steps or StepRange()).sql("t.step"))
        )
        doc.verdict = view(con, "merge_straggler_verdict")
        doc.rank_rollup = view(con, "rank_rollup", "SELECT * FROM rank_rollup ORDER BY rank")
        doc.collectives = view(con, "collectives", "SELECT * FROM collectives ORDER BY coll_id")
        # Per collective operation: how much of its time was hidden behind other GPU work.
        doc.comm_overlap = view(
            con,
            "comm_overlap_by_op",
            "SELECT * EXCLUDE (job) FROM comm_overlap_by_op ORDER BY comms_ns DESC, op",
        )
        doc.alignment = view(con, "alignment_quality", "SELECT * FROM alignment_quality ORDER BY host")
        doc.top_kernels = Part(top_kernels(con, limit=TOP_KERNELS))
        doc.memop_summary = view(con, "memop_summary")
        doc.gaps = view(con, "idle_by_cause", "SELECT * FROM idle_by_cause ORDER BY rank, cause")
        doc.longest_gaps = view(con, "longest_gaps", SQL["longest_gaps"])
        _whatif(con, doc)
        doc.comms = comms_breakdown(con)
        doc.launch_stats = view(con, "launch_stats")
        doc.sync_calls = view(con, "sync_calls")
        doc.mfu = _mfu(con, mfu_options)
        doc.findings = Part(diagnosed.result())
        if not doc.findings.value and not has_gpu_operations(con):  # not "nothing crossed a threshold"
            held = held_instead(con) or "nothing was ingested, or no file had any"
            doc.findings = Part(
                missing=f"no findings can be made: the workspace has no GPU operations ({held})"
            )
    doc.env = safe_env(con)
    doc.rank_partition = partition_frame(doc)
    doc.timeline = build_timeline(con, steps, budget=timeline_budget)
    return doc
