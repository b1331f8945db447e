"""The `unclassified-kernels` capture finding: much kernel time no kernel name rule matched.

Why a module of its own: one finding, one home; its share and note are `classify`'s
(classify.unclassified_share / unclassified_note), so the finding and the `classify` command say
the same. A capture finding is a fact about the trace that changes how every other finding must be read:
it has no recoverable time and is listed before the performance findings.
"""

from __future__ import annotations

from ..classify import UNCLASSIFIED_WARN_PCT, unclassified_note, unclassified_share
from ..store.query_layer import statements
from .base import Ctx, Finding, Fix
from .declare import Cause, Doc, Threshold, finding

SQL = statements("rules/unclassified_kernels")


@finding(
    "unclassified-kernels",
    doc=Doc(
        what=(
            "more than `unclassified_max_pct` % of kernel time (all ranks) is in category `other`: no "
            "kernel rule (data/kernel_rules.csv, stored `--rules`) matches those names, so the "
            "partition's compute/memory split, and the findings read from it, miss that time; `summary` "
            "prints the same note (20 %, `classify.UNCLASSIFIED_WARN_PCT`). Severity medium; metrics "
            "`unclassified_pct`, `unclassified_names`; the fix is a `classify --rules` line per family "
            "(`classify --list-other` lists the names)"
        ),
        source="`kernel_summary`",
        recoverable="none (capture)",
    ),
    thresholds={
        "unclassified_max_pct": Threshold(
            UNCLASSIFIED_WARN_PCT,
            (
                "note when more than this % of kernel time is unclassified (category other): the "
                "partition's compute/memory split is then uncertain"
            ),
        ),
    },
    reads=("kernel_summary", "steps"),
    causes=(
        Cause(
            "unclassified-kernels",
            ("unclassified-kernels",),
            "Kernel time no rule classifies (the compute/memory split is uncertain)",
            "pct",
            magnitude="unclassified_pct",
            threshold="unclassified_max_pct",
            of_step=False,
        ),
    ),
)
def unclassified_kernels(ctx: Ctx) -> list[Finding]:
    """More than `unclassified_max_pct` % of kernel time in category 'other' (no kernel rule
    matched): the partition's compute and memory columns are the rules' verdicts, so the
    memory-bound, compute-efficiency and fusion findings read a split that much time is missing
    from. Kernel time over all ranks (kernel_summary), as `classify` shows it."""
    if not ctx.has("kernel_summary"):
        return []
    share = unclassified_share(ctx.con)
    if share is None or share[0] <= ctx.th["unclassified_max_pct"]:
        return []
    pct, names = share
    ranks = [int(r) for r in ctx.column(SQL["unclassified_ranks"])]
    return [
        ctx.finding(
            id="unclassified-kernels",
            title=f"{pct:.0f} % of kernel time is unclassified: the compute/memory split is uncertain",
            kind="capture",
            severity="medium",
            summary=unclassified_note(pct, names) + ".",
            ranks=ranks,
            steps=[],
            recoverable_ns_per_step=None,
            recoverable_method="not a performance problem: no recoverable time",
            metrics={"unclassified_pct": round(pct, 2), "unclassified_names": names},
            evidence=[
                ctx.evidence(
                    "unclassified kernels",
                    "Kernel names no rule of data/kernel_rules.csv (or the stored --rules) matches, "
                    "largest first, all ranks (kernel_summary, as `classify --list-other`).",
                    SQL["unclassified_kernels"],
                )
            ],
            signals=[],
            fixes=[
                Fix(
                    "Classify them: `nsight-analyze classify --rules FILE` with a line per kernel "
                    "family (priority,pattern,category,subcategory,note); later ingests keep the rules",
                    "a regex per family; the rules are the user's claim of what each kernel does",
                )
            ],
        )
    ]
