"""Gather what the report shows from the library: summary, stored tables, workspace info, MFU, findings.

Why a separate module: the report only renders what the library returns, and every section's
data comes through here from the stored analysis tables and the library's functions (plain
imports: a bug fails the report and its tests instead of turning into a note). Only a number
the data cannot support (MFU without model FLOPs or a known peak) becomes a one-line reason
the page shows.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import duckdb

from ... import comms, diagnose, mfu, whatif
from ...errors import UserError

if TYPE_CHECKING:
    from ...mfu_options import MfuOptions

# Environment names whose values the report never shows, even if a workspace (older ingest,
# hand-edited) holds them: the env table is redacted at ingest; this is the second fence.
SECRET_NAME = re.compile(
    r"(?i)(?:key|token|secret|passw|pwd|credential|auth|cookie|session|private|cert|sig)"
)
SECRET_VALUE = re.compile(r"(?i)^(?:sk-|ghp_|gho_|github_pat_|xox[bap]-|akia|aiza|eyj)|[A-Za-z0-9+/=_-]{32,}")

# What the report reads: the library's documents it shows (diagnose, what-if, communication per
# dimension, MFU) and the stored tables its sections name; computed on first read, nothing more
# (tests/test_lazy_analysis.py checks it covers every name render/report/ mentions).
READS = (
    *diagnose.READS, *whatif.READS, *comms.READS, *mfu.READS, "collective_waits", "comm_overlap_by_op",
    "idle_by_cause", "launch_stats", "longest_gaps", "memop_summary",
)  # fmt: skip

TOP_KERNELS = 20
# The partition table's columns: memory (the total) is followed by its two parts, memory-bound
# kernels and copies (they sum to it), and all copy time, hidden or not, ends the list.
PARTITION_COLUMNS = [
    "window_ns",
    "compute_ns",
    "memory_ns",
    "memory_kernels_ns",
    "copies_ns",
    "other_ns",
    "comms_exposed_ns",
    "idle_ns",
    "launch_gap_ns",
    "input_stall_ns",
    "sync_stall_ns",
    "host_bound_ns",
    "idle_other_ns",
    "comms_total_ns",
    "comms_hidden_ns",
    "overlap_pct",
    "copies_total_ns",
]


@dataclass
class Part:
    """One piece of report data: a value, or the reason it is missing."""

    value: Any = None
    missing: str | None = None

    @property
    def ok(self) -> bool:
        return self.missing is None


@dataclass
class StepRange:
    """Inclusive step-number range from `--steps A:B` (either end may be open)."""

    first: int | None = None
    last: int | None = None

    def __str__(self) -> str:
        return f"{'' if self.first is None else self.first}:{'' if self.last is None else self.last}"

    def sql(self, column: str = "step") -> str:
        """A SQL condition selecting step rows (never the whole-capture NULL row)."""
        parts = [f"{column} IS NOT NULL"]
        if self.first is not None:
            parts.append(f"{column} >= {int(self.first)}")
        if self.last is not None:
            parts.append(f"{column} <= {int(self.last)}")
        return " AND ".join(parts)


@dataclass
class ReportInputs:
    """Everything the page renders, straight from the library."""

    steps: StepRange | None
    info: Part = field(default_factory=Part)
    summary_rank: Part = field(default_factory=Part)
    partition: Part = field(default_factory=Part)  # DataFrame: one row per rank
    rank_step: Part = field(default_factory=Part)  # DataFrame: time_partition step rows
    verdict: Part = field(default_factory=Part)
    rank_rollup: Part = field(default_factory=Part)
    collectives: Part = field(default_factory=Part)
    comm_overlap: Part = field(default_factory=Part)
    alignment: Part = field(default_factory=Part)
    top_kernels: Part = field(default_factory=Part)
    memop_summary: Part = field(default_factory=Part)
    gaps: Part = field(default_factory=Part)
    longest_gaps: Part = field(default_factory=Part)
    whatif: Part = field(default_factory=Part)  # whole-job what-if rows (docs/whatif.md)
    attribution: Part = field(default_factory=Part)  # whole-job rank_attribution rows
    comms: Part = field(default_factory=Part)  # comms() by dimension and communicator (comms_section)
    launch_stats: Part = field(default_factory=Part)
    sync_calls: Part = field(default_factory=Part)
    mfu: Part = field(default_factory=Part)
    findings: Part = field(default_factory=Part)
    env: Part = field(default_factory=Part)


def view(con: duckdb.DuckDBPyConnection, name: str, sql: str | None = None) -> Part:
    """Rows of a stored table or live view of the workspace (or of a query over it)."""
    return Part(con.execute(sql or f"SELECT * FROM {name}").df())


def _mfu(con: duckdb.DuckDBPyConnection, options: MfuOptions) -> Part:
    """MFU/HFU, or why they cannot be known from this workspace."""
    from ...mfu import hfu_mfu_summary

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
    sums = ", ".join(f"sum({c})::BIGINT AS {c}" for c in PARTITION_COLUMNS if c != "overlap_pct")
    return view(
        con,
        "time_partition",
        f"""SELECT rank, {sums},
                   100.0 * sum(comms_hidden_ns) / nullif(sum(comms_total_ns), 0) AS overlap_pct
            FROM time_partition WHERE {steps.sql()} GROUP BY rank ORDER BY rank""",
    )


def collect(
    con: duckdb.DuckDBPyConnection,
    steps: StepRange | None = None,
    mfu_options: MfuOptions | dict[str, Any] | None = None,
) -> ReportInputs:
    """Read every stored analysis the report shows (and MFU/HFU where the data supports them)."""
    from ...diagnose import diagnose
    from ...duck import on_own_cursor
    from ...gpus import stated_gpu
    from ...mfu import MfuOptions
    from ...mfu_rows import shared_peaks
    from ...no_data import has_gpu_operations, held_instead
    from ...summary import summary, top_kernels
    from ...workspace_info import workspace_info

    mfu_options = MfuOptions.of(mfu_options)
    stated = stated_gpu(mfu_options.gpu) if mfu_options.gpu else contextlib.nullcontext()
    # a --gpu reaches diagnose's rules too (as `diagnose --gpu`); diagnose runs on its own cursor
    # beside the other reads (its many small queries leave a core idle), in this context
    with shared_peaks(), stated, ThreadPoolExecutor(max_workers=1) as pool:
        diagnosed = pool.submit(contextvars.copy_context().run, on_own_cursor, con, diagnose)
        inp = ReportInputs(steps=steps)
        inp.info = Part(workspace_info(con))
        inp.summary_rank = Part(summary(con, by="rank"))
        if steps:
            inp.partition = _partition_of_steps(con, steps)
        else:
            inp.partition = view(
                con, "time_partition", "SELECT * FROM time_partition WHERE step IS NULL ORDER BY rank"
            )
        inp.rank_step = view(
            con,
            "time_partition",
            "SELECT t.*, coalesce(j.steady, true) AS steady "
            "FROM time_partition AS t JOIN ranks AS r USING (rank) LEFT JOIN job_steps AS j "
            f"ON j.job = r.job AND j.step = t.step WHERE {(steps or StepRange()).sql('t.step')} "
            "ORDER BY rank, step",
        )
        inp.verdict = view(con, "merge_straggler_verdict")
        inp.rank_rollup = view(con, "rank_rollup", "SELECT * FROM rank_rollup ORDER BY rank")
        inp.collectives = view(con, "collectives", "SELECT * FROM collectives ORDER BY coll_id")
        # Per collective operation: how much of its time was hidden behind other GPU work.
        inp.comm_overlap = view(
            con,
            "comm_overlap_by_op",
            "SELECT * EXCLUDE (job) FROM comm_overlap_by_op ORDER BY comms_ns DESC, op",
        )
        inp.alignment = view(con, "alignment_quality", "SELECT * FROM alignment_quality ORDER BY host")
        inp.top_kernels = Part(top_kernels(con, limit=TOP_KERNELS))
        inp.memop_summary = view(con, "memop_summary")
        inp.gaps = view(con, "idle_by_cause", "SELECT * FROM idle_by_cause ORDER BY rank, cause")
        inp.longest_gaps = view(
            con,
            "longest_gaps",
            "SELECT rank, step, cause, duration_ns, host_activity FROM longest_gaps "
            "ORDER BY duration_ns DESC, rank, start_ns LIMIT 15",
        )
        inp.whatif = view(
            con, "whatif", "SELECT * FROM whatif WHERE step IS NULL ORDER BY job, gain_ns DESC, scenario"
        )
        if inp.whatif.ok and inp.whatif.value.empty:  # unknown, and why (never "nothing to gain")
            from ...whatif import empty_reason

            inp.whatif = Part(missing=f"unknown: {empty_reason(con)}")
        inp.attribution = view(
            con, "rank_attribution", "SELECT * FROM rank_attribution WHERE step IS NULL ORDER BY job, rank"
        )
        from .comms_section import gather as comms_by_dimension  # lazy: that module imports this one

        inp.comms = comms_by_dimension(con)
        inp.launch_stats = view(con, "launch_stats")
        inp.sync_calls = view(con, "sync_calls")
        inp.mfu = _mfu(con, mfu_options)
        inp.findings = Part(diagnosed.result())
        if not inp.findings.value and not has_gpu_operations(con):  # not "nothing crossed a threshold"
            held = held_instead(con) or "nothing was ingested, or no file had any"
            inp.findings = Part(
                missing=f"no findings can be made: the workspace has no GPU operations ({held})"
            )
    inp.env = safe_env(con)
    return inp
