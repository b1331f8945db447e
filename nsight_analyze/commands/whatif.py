"""`nsight-analyze whatif`: the job's step time if each cause of lost time went away (docs/whatif.md)."""

from __future__ import annotations

import math

import click

from ..api import Workspace
from ..clihelp import job_option, output_options
from ..render.data import to_json
from ..render.markdown import markdown_table, markdown_text
from ..render.output import emit
from ..render.table import PlainTable
from ..render.terminal import echo
from ..render.units import format_duration
from ..whatif import READS, SCENARIO_TEXT, empty_reason, scenarios, whatif_json


def _table(rows: list[dict], several_jobs: bool) -> PlainTable:
    def pct(r: dict) -> float:
        return 100.0 * r["gain_ns"] / r["replayed_actual_ns"] if r["replayed_actual_ns"] else math.nan

    return PlainTable.from_records(
        [
            {
                **({"job": r["job"]} if several_jobs else {}),
                "scenario": r["scenario"],
                "step": r["step"] if r["step"] is not None else "all (mean)",
                "actual_step_time_ns": float(r["actual_step_time_ns"]),
                "step_time_ns": float(r["step_time_ns"]),
                "gain_ns": float(r["gain_ns"]),
                "gain_pct": pct(r),
            }
            for r in rows
        ]
    )


def _lines(rows: list[dict]) -> list[str]:
    lines = []
    for r in rows:
        if r["step"] is not None or not r["replayed_actual_ns"]:
            continue
        fixed = r["fixed_ranks"].split(",") if r["fixed_ranks"] else []
        who = f" (rank{'s' if len(fixed) > 1 else ''} {', '.join(fixed)})" if fixed else ""
        pct = 100.0 * r["gain_ns"] / r["replayed_actual_ns"]
        lines.append(
            f"if {SCENARIO_TEXT.get(r['scenario'], r['scenario'])}{who}: "
            f"{format_duration(r['step_time_ns'])} per step instead of "
            f"{format_duration(r['actual_step_time_ns'])} "
            f"({abs(pct):.1f} % {'faster' if pct >= 0 else 'slower'})"
        )
    return lines


@click.command(name="whatif")
@click.option("--steps/--no-steps", "per_step", default=False, help="Table: one row per step as well.")
@output_options()
@job_option
def command(db: str, fmt: str, per_step: bool, job: int | None) -> None:
    """Per step and for the whole job: the job's step time (its slowest rank's step window) if the slow
    rank(s) ran at the median rank's speed, communication were hidden behind compute, or input stalls,
    launch gaps or sync stalls were removed. Computed by replaying the measured dependencies (a
    collective ends when its last participant arrives plus its transfer; a rank's next work starts
    after its previous work and its collectives), so waiting ranks gain only what the critical path
    gains.

    JSON: {"scenarios": [{"scenario", "step" (null = whole job), "actual_step_time_ns", "step_time_ns",
    "gain_ns", ...}]} (docs/whatif.md). CSV: those rows. Every job of the workspace; --job N shows only
    that one."""
    with Workspace(db, job=job).connect(needs=READS) as con:
        rows = scenarios(con)
        reason = None if rows else empty_reason(con)
    if fmt == "json":
        print(to_json(whatif_json(rows, reason)))
        return
    if fmt == "csv":
        out = whatif_json(rows)["scenarios"]
        for r in out:
            r["fixed_ranks"] = ",".join(map(str, r["fixed_ranks"])) if r["fixed_ranks"] else ""
        emit(PlainTable.from_records(out), "csv")
        return
    if not rows:
        echo(f"no what-if (unknown): {reason}")
        return
    shown = rows if per_step or fmt == "markdown" else [r for r in rows if r["step"] is None]
    several = len({r["job"] for r in rows}) > 1
    if fmt == "markdown":
        print(markdown_table(_table(shown, several), "What fixing each cause would buy"))
        print()
        print("\n".join(f"- {markdown_text(line)}" for line in _lines(rows)))
        return
    emit(_table(shown, several), fmt, title="What fixing each cause would buy")
    for line in _lines(rows):
        echo(line, hang="    ")
