"""`nsight-analyze ranks`: per-rank alignment, compute, collective waits and the straggler verdict."""

from __future__ import annotations

import math
from typing import Any

import click

from .. import whatif
from ..api import Workspace, rank_report, rank_report_json
from ..api.frames import column_total
from ..clihelp import job_option, output_options
from ..plain import missing
from ..render.data import to_json
from ..render.markdown import markdown_table, markdown_text
from ..render.output import emit
from ..render.table import PlainTable
from ..render.terminal import echo
from ..render.units import UNKNOWN, format_duration

Rows = list[dict[str, Any]]
_COLUMNS = (
    "rank", "job", "host", "gpu", "offset_ns", "align", "residual_p50_ns", "residual_p95_ns", "compute_ns",
    "wait_suffered_ns", "wait_caused_ns", "times_slowest", "times_last", "cost_ns", "straggler", "cause",
)  # fmt: skip


def _num(value: Any) -> float:
    """A float (NaN, which the renderer prints empty, when missing)."""
    return math.nan if missing(value) else float(value)


def _gpu(row: dict[str, Any]) -> str:
    """The GPU model when known, else 'device N' (a bare number reads as a count; UNKNOWN when
    neither is known)."""
    name, device = row["gpu_name"], row["device_id"]
    if isinstance(name, str) and name:
        return name
    return UNKNOWN if missing(device) else f"device {int(device)}"


def _table(rows: Rows, several_jobs: bool, attribution: Rows | None = None) -> PlainTable:
    """The terminal table: nanosecond columns, which the renderer shows in human units. The
    straggler and cause columns only when a rank has one (an empty column costs a table width)."""
    cause = {r["rank"]: r["cause"] for r in attribution or [] if r["step"] is None and r["cause"]}
    records = [
        {
            "rank": r["rank"],
            "job": r["job"],
            "host": r["host"],
            "gpu": _gpu(r),
            "offset_ns": _num(r["clock_offset_ns"]),
            "align": r["alignment_method"],
            "residual_p50_ns": _num(r["residual_p50_ns"]),
            "residual_p95_ns": _num(r["residual_p95_ns"]),
            "compute_ns": _num(r["compute_ns"]),
            "wait_suffered_ns": _num(r["wait_suffered_ns"]),
            "wait_caused_ns": _num(r["wait_caused_ns"]),
            "times_slowest": r["times_slowest"],
            "times_last": r["times_last"],
            "cost_ns": _num(r["cost_ns"]),
            "straggler": {True: "yes", False: ""}.get(r["straggler"]),
            "cause": cause.get(int(r["rank"]), ""),
        }
        for r in rows
    ]
    columns = [c for c in _COLUMNS if c != "job" or several_jobs]
    empty = {c for c in ("straggler", "cause") if not any(r[c] for r in records)}
    return PlainTable.from_records(records, [c for c in columns if c not in empty])


def _attribution_lines(attribution: Rows) -> list[str]:
    from ..render.escape import clean

    return [
        f"rank {r['rank']} is slow: {r['cause']} ({format_duration(r['excess_ns'])} over the median rank): "
        + clean(r["evidence"] or "")
        for r in attribution
        if r["step"] is None and r["cause"]
    ]


def _verdict_line(v: dict[str, Any], rows: Rows) -> str:
    text = f"verdict: {v['verdict']}"
    if v["verdict"] == "persistent":
        s = next(r for r in rows if r["rank"] == v["straggler_rank"])
        text += (
            f" straggler rank {int(v['straggler_rank'])}: slowest in {v['top_share']:.0%} of the "
            f"imbalanced steps, last at {int(s['times_last'])} collectives; costs the job "
            f"{format_duration(v['straggler_delay_ns'])}, the other ranks "
            f"{format_duration(v['straggler_cost_ns'])} of GPU time (they wait "
            f"{format_duration(s['wait_caused_ns'])} of GPU time for it inside NCCL, partly hidden)"
        )
    elif not missing(v["median_ratio"]):
        text += f" (median max/mean compute {v['median_ratio']:.3f} over {int(v['steps'])} steps)"
    return text


def _span(first: int, last: int) -> str:
    return f"rank {first}" if first == last else f"ranks {first}-{last}"


def _summary(jobs: Rows, verdict: Rows, rows: Rows, alignment: Rows) -> list[str]:
    """Per job: what is present ("2 of 128 ranks"), the verdict (with the straggler's cost), the
    alignment methods, and the NCCL kernels no wait could be computed for."""
    lines = []
    several = len(jobs) > 1
    if several:
        lines.append(f"{len(jobs)} jobs in this workspace: ranks of different jobs are never compared")
    for job in jobs:
        head = (
            f"job {int(job['job'])} ({_span(int(job['first_rank']), int(job['last_rank']))}): "
            if several
            else ""
        )
        mine = [r for r in rows if r["job"] == job["job"]]
        v = [r for r in verdict if r["job"] == job["job"]]
        parts = [
            job["label"]
            + (
                ""
                if job["complete"]
                else " (partial: collectives whose participants are missing get no wait or skew)"
            )
        ]
        if v:
            parts.append(_verdict_line(v[0], mine))
        methods = ", ".join(f"{a['host']}: {a['method']}" for a in alignment if a["job"] == job["job"])
        if methods:
            parts.append(f"clock alignment: {methods}")
        peer = column_total(mine, "peer_unknown")
        unmatched = column_total(mine, "unmatched") - peer
        incomplete = column_total(mine, "incomplete")
        if peer:
            parts.append(f"{peer} point-to-point kernel(s) have no known peer in the workspace: not paired")
        if unmatched:
            parts.append(f"{unmatched} NCCL kernel(s) matched no other rank (different collective counts)")
        if incomplete:
            parts.append(f"{incomplete} NCCL kernel(s) matched while participants are missing: no wait")
        if several:
            lines.append(head + "; ".join(parts))
        else:
            lines.extend(parts)
    return lines


@click.command(name="ranks")
@output_options()
@job_option
def command(db: str, fmt: str, job: int | None) -> None:
    """Per rank: job, host, GPU, clock offset and residual, compute time, collective wait suffered and
    caused, times slowest; per job: how many of its ranks are present (2 of 128), and whether it has a
    persistent or rotating straggler or is balanced.

    Every job of the workspace, each labelled; --job N shows only that one.
    CSV: the rank rows of the JSON (raw values). Python: nsight_analyze.open(DB).ranks(),
    .rank_report() (the JSON document)."""
    ws = Workspace(db, job=job)
    with ws.connect(needs=whatif.READS) as con:
        report = rank_report(con)
    note = ws.scope.note() if ws.scope else None
    rows, verdict, alignment, jobs = (report[k] for k in ("ranks", "verdict", "alignment", "jobs"))
    partial = report["partial"]
    if fmt == "json":
        print(to_json(rank_report_json(report)))
        return
    if fmt == "csv":
        emit(PlainTable.from_records(rows), "csv")
        return
    lines = ([note] if note else []) + _summary(jobs, verdict, rows, alignment)
    attribution = report.get("attribution", [])
    lines += _attribution_lines(attribution)
    if partial:
        lines.append(
            f"{partial} collective instance(s) had fewer participants than their communicator or series"
        )
    if fmt == "markdown":
        print(markdown_table(_table(rows, len(jobs) > 1, attribution), "Ranks"))
        print()
        print("\n".join(f"- {markdown_text(line)}" for line in lines))
        return
    emit(_table(rows, len(jobs) > 1, attribution), fmt, title="Ranks")
    for line in lines:
        echo(line, hang="    ")
