"""The report document: every number the HTML report shows, read once from the workspace.

Why plain data: the report's renderer (render/report/) turns this document into HTML without a
connection or a library call, as compare's page renders compare()'s document; the reads (and the
analyses they need) happen once, here, and a test can check the numbers without a page. A `Part`
says, for a piece the data cannot support (MFU without model FLOPs, comms without NCCL), why it is
missing: the page shows the reason instead of a number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import UserError

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


@dataclass
class Timeline:
    """What the timeline section shows, and why it shows that much (report_doc/timeline.py)."""

    payload: dict[str, Any] = field(default_factory=dict)
    window: tuple[int, int] | None = None  # aligned ns, half-open
    steps_shown: list[int] = field(default_factory=list)
    mode: str = "exact"  # exact | aggregated | empty
    ops_in_window: int = 0
    notes: list[str] = field(default_factory=list)


@dataclass
class ReportDocument:
    """Everything the page renders, straight from the library (DataFrames, dicts, findings).

    `rank_partition` is the per-rank partition the page shows (summary's rows for the whole
    capture, the chosen steps' rows summed with --steps); `partition` and `summary_rank` are
    what it was chosen from. `attribution_evidence` holds one sentence per `attribution` row
    (None where no cause is blamed); `whatif_scenarios` says what each what-if scenario removes."""

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
    comms: Part = field(default_factory=Part)  # comms() by dimension and by communicator
    launch_stats: Part = field(default_factory=Part)
    sync_calls: Part = field(default_factory=Part)
    mfu: Part = field(default_factory=Part)
    findings: Part = field(default_factory=Part)
    env: Part = field(default_factory=Part)
    rank_partition: Part = field(default_factory=Part)  # DataFrame: the per-rank partition shown
    partition_columns: list[str] = field(default_factory=lambda: list(PARTITION_COLUMNS))  # its order
    attribution_evidence: list[str | None] = field(default_factory=list)
    whatif_scenarios: dict[str, str] = field(default_factory=dict)
    timeline: Timeline | None = None
    job_note: str | None = None  # job_scope.JobScope.note: the job shown, in a multi-job workspace
    version: str = ""  # the nsight-analyze that read it
