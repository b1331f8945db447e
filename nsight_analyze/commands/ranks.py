"""`nsight-analyze ranks`: per-rank alignment, compute, collective waits and the straggler verdict."""

from __future__ import annotations

import click
import pandas as pd

from ..api import Workspace, rank_report, rank_report_json
from ..clihelp import job_option, output_options
from ..render.data import to_json
from ..render.markdown import markdown_table, markdown_text
from ..render.output import emit
from ..render.terminal import echo
from ..render.units import UNKNOWN, format_duration


def _num(col: pd.Series) -> pd.Series:
    """Plain float64 (NaN, which the renderer prints empty) instead of nullable <NA>."""
    return pd.to_numeric(col, errors="coerce").astype("float64")


def _gpu(rows: pd.DataFrame) -> list[str]:
    """The GPU model when known, else 'device N' (a bare number reads as a count; UNKNOWN when
    neither is known)."""
    out = []
    for name, device in zip(rows["gpu_name"], rows["device_id"], strict=True):
        if isinstance(name, str) and name:
            out.append(name)
        else:
            out.append(UNKNOWN if pd.isna(device) else f"device {int(device)}")
    return out


def _table(rows: pd.DataFrame, several_jobs: bool, attribution: list[dict] | None = None) -> pd.DataFrame:
    """The terminal table: nanosecond columns, which the renderer shows in human units. The
    straggler and cause columns only when a rank has one (an empty column costs a table width)."""
    table = pd.DataFrame(
        {
            "rank": rows["rank"],
            **({"job": rows["job"]} if several_jobs else {}),
            "host": rows["host"],
            "gpu": _gpu(rows),
            "offset_ns": _num(rows["clock_offset_ns"]),
            "align": rows["alignment_method"],
            "residual_p50_ns": _num(rows["residual_p50_ns"]),
            "residual_p95_ns": _num(rows["residual_p95_ns"]),
            "compute_ns": _num(rows["compute_ns"]),
            "wait_suffered_ns": _num(rows["wait_suffered_ns"]),
            "wait_caused_ns": _num(rows["wait_caused_ns"]),
            "times_slowest": rows["times_slowest"],
            "times_last": rows["times_last"],
            "cost_ns": _num(rows["cost_ns"]),
            "straggler": rows["straggler"].map({True: "yes", False: ""}),
            "cause": _causes(rows, attribution or []),
        }
    )
    empty = [c for c in ("straggler", "cause") if not table[c].fillna("").astype(str).str.strip().any()]
    return table.drop(columns=empty)


def _causes(rows: pd.DataFrame, attribution: list[dict]) -> list[str]:
    """Per rank row: the cause attribution blames it for (docs/whatif.md), '' when none."""
    cause = {r["rank"]: r["cause"] for r in attribution if r["step"] is None and r["cause"]}
    return [cause.get(int(r), "") for r in rows["rank"]]


def _attribution_lines(attribution: list[dict]) -> list[str]:
    from ..render.escape import clean

    return [
        f"rank {r['rank']} is slow: {r['cause']} ({format_duration(r['excess_ns'])} over the median rank): "
        + clean(r["evidence"] or "")
        for r in attribution
        if r["step"] is None and r["cause"]
    ]


def _verdict_line(v: pd.Series, rows: pd.DataFrame) -> str:
    text = f"verdict: {v['verdict']}"
    if v["verdict"] == "persistent":
        s = rows[rows["rank"] == v["straggler_rank"]].iloc[0]
        text += (
            f" straggler rank {int(v['straggler_rank'])}: slowest in {v['top_share']:.0%} of the "
            f"imbalanced steps, last at {int(s['times_last'])} collectives; costs the job "
            f"{format_duration(v['straggler_delay_ns'])}, the other ranks "
            f"{format_duration(v['straggler_cost_ns'])} of GPU time (they wait "
            f"{format_duration(s['wait_caused_ns'])} of GPU time for it inside NCCL, partly hidden)"
        )
    elif pd.notna(v["median_ratio"]):
        text += f" (median max/mean compute {v['median_ratio']:.3f} over {int(v['steps'])} steps)"
    return text


def _span(first: int, last: int) -> str:
    return f"rank {first}" if first == last else f"ranks {first}-{last}"


def _summary(
    jobs: pd.DataFrame, verdict: pd.DataFrame, rows: pd.DataFrame, alignment: pd.DataFrame
) -> list[str]:
    """Per job: what is present ("2 of 128 ranks"), the verdict (with the straggler's cost), the
    alignment methods, and the NCCL kernels no wait could be computed for."""
    lines = []
    several = len(jobs) > 1
    if several:
        lines.append(f"{len(jobs)} jobs in this workspace: ranks of different jobs are never compared")
    for job in jobs.itertuples(index=False):
        head = f"job {int(job.job)} ({_span(int(job.first_rank), int(job.last_rank))}): " if several else ""
        mine = rows[rows["job"] == job.job]
        v = verdict[verdict["job"] == job.job]
        parts = [
            job.label
            + (
                ""
                if job.complete
                else " (partial: collectives whose participants are missing get no wait or skew)"
            )
        ]
        if len(v):
            parts.append(_verdict_line(v.iloc[0], mine))
        a = alignment[alignment["job"] == job.job]
        methods = ", ".join(f"{h}: {m}" for h, m in zip(a["host"], a["method"], strict=True))
        if methods:
            parts.append(f"clock alignment: {methods}")
        peer = int(mine["peer_unknown"].sum())
        unmatched = int(mine["unmatched"].sum()) - peer
        incomplete = int(mine["incomplete"].sum())
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
    with ws.connect() as con:
        report = rank_report(con)
    note = ws.scope.note() if ws.scope else None
    rows, verdict, alignment, jobs = (report[k] for k in ("ranks", "verdict", "alignment", "jobs"))
    partial = report["partial"]
    if fmt == "json":
        print(to_json(rank_report_json(report)))
        return
    if fmt == "csv":
        emit(rows, "csv")
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
