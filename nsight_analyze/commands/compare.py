"""`nsight-analyze compare BEFORE AFTER`: what changed between two runs, is it real, and a CI gate.

Thin by design: `nsight_analyze.compare.compare()` computes everything; this module renders it as
terminal tables, markdown (PR comments) or JSON (CI), writes the HTML diff, and turns the gate
into the exit status (1 = regression beyond --fail-on-regression, 4 = with the gate, an input
without GPU operations: a gate never passes on no data; 0 otherwise). On a terminal a spinner
on stderr says what it is doing (nothing in pipes and CI).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from .. import analysis
from ..clihelp import output_options, require_workspace_data
from ..compare import DEFAULTS, PARTS, SIDES, compare_prepared, is_workspace, resolve_settings, workspaces
from ..compare.setup import parse_rank_map
from ..compare.verdict import check_gate
from ..errors import NoData, UserError, validate_positive
from ..partition import COPIES_TOTAL, MEMORY_PARTS
from ..render.data import to_json
from ..render.markdown import markdown_table, markdown_text
from ..render.table import PlainTable
from ..render.terminal import print_table, wrap
from ..store.workspace import open_workspace
from .ingest import Spinner, progress_wanted

NAME_WIDTH = 70


def _ms(ns: Any) -> float | None:
    return None if ns is None or ns != ns else ns / 1e6  # None and NaN: unknown


def _short(name: str) -> str:
    return name if len(name) <= NAME_WIDTH else name[: NAME_WIDTH - 1] + "…"


def _step_table(r: dict[str, Any]) -> PlainTable:
    st = r["step_time"]
    rows = [("slowest", st["slowest"])] + [(f"rank {p['rank']}", p) for p in st["per_rank"]]
    out = []
    for label, s in rows:
        ci = s["ci_pct"] or [None, None]
        out.append(
            {
                "series": label,
                "before_med_ms": _ms(s["before"]["median_ns"]),
                "before_p10_ms": _ms(s["before"]["p10_ns"]),
                "before_p90_ms": _ms(s["before"]["p90_ns"]),
                "after_med_ms": _ms(s["after"]["median_ns"]),
                "after_p10_ms": _ms(s["after"]["p10_ns"]),
                "after_p90_ms": _ms(s["after"]["p90_ns"]),
                "delta_pct": s["delta_pct"],
                "ci_low_pct": ci[0],
                "ci_high_pct": ci[1],
                "p_value": None if s["p_value"] is None else f"{s['p_value']:.2g}",
            }
        )
    return PlainTable.from_records(out)


def _partition_rows() -> tuple[str, ...]:
    """The partition table's rows: the parts, memory's two parts (memory-bound kernels, copies:
    they sum to memory) right after memory, then the window and all copy time, hidden or not."""
    rows = [c for p in PARTS for c in ((p, *MEMORY_PARTS) if p == "memory_ns" else (p,))]
    return (*rows, "window_ns", *COPIES_TOTAL)


# Row labels that say what a row holds where the column name alone does not.
_PART_LABELS = {
    "memory_ns": "memory (kernels + copies)",
    "memory_kernels_ns": "memory kernels",
    "copies_ns": "copies",
    "copies_total_ns": "copies incl. hidden",
}


def _share(ns: float | None, window: float | None) -> float | None:
    """100 x ns / window; None when either is unknown (a memory split may be) or the window empty."""
    return 100 * ns / window if ns is not None and window else None


def _partition_table(r: dict[str, Any]) -> PlainTable:
    total = r["partition"]["total"]
    if not total:
        return PlainTable([])
    b, a = total["before"], total["after"]
    rows = []
    for part in _partition_rows():
        if part not in b:  # a result made before the memory split
            continue
        rows.append(
            {
                "part": _PART_LABELS.get(part, part.removesuffix("_ns")),
                "before_ms": _ms(b[part]),
                "after_ms": _ms(a[part]),
                "delta_ms": None if None in (a[part], b[part]) else _ms(a[part] - b[part]),
                "before_pct": _share(b[part], b["window_ns"]),
                "after_pct": _share(a[part], a["window_ns"]),
            }
        )
    rows.append({"part": "overlap_pct", "before_pct": b["overlap_pct"], "after_pct": a["overlap_pct"]})
    return PlainTable.from_records(rows)


def _rank_partition_table(r: dict[str, Any]) -> PlainTable:
    """Per rank: the window, the change of each exclusive part (memory as its two parts: memory-bound
    kernels and copies), and the overlap before/after."""
    rows = []
    for p in r["partition"]["per_rank"]:
        b, a, d = p["before"], p["after"], p["delta"]
        rows.append(
            {
                "rank": p["rank"],
                "window_before_ms": _ms(b["window_ns"]),
                "window_after_ms": _ms(a["window_ns"]),
                "compute_delta_ms": _ms(d["compute_ns"]),
                "memory_kernels_delta_ms": _ms(d.get("memory_kernels_ns")),
                "copies_delta_ms": _ms(d.get("copies_ns")),
                "comms_exposed_delta_ms": _ms(d["comms_exposed_ns"]),
                "idle_delta_ms": _ms(d["idle_ns"]),
                "overlap_before_pct": b["overlap_pct"],
                "overlap_after_pct": a["overlap_pct"],
            }
        )
    return PlainTable.from_records(rows)


def _rate_table(r: dict[str, Any]) -> PlainTable:
    """Work per unit of time (the verdict's basis without steps): per run, and the change per rank."""
    wr = r.get("work_rate")
    if not wr or wr["before"]["rate"] is None:
        return PlainTable([])
    rows = [
        {
            "series": side,
            "window_ms": _ms(wr[side]["window_ns"]),
            "work_ms": _ms(wr[side]["work_ns"]),
            "work_per_window_pct": None if wr[side]["rate"] is None else 100 * wr[side]["rate"],
            "busy_pct": wr[side]["busy_pct"],
            "matched_kernel_time_pct": wr[side]["coverage_pct"],
        }
        for side in ("before", "after")
    ]
    if wr["comparable"]:
        lo, hi = wr["range_pct"]
        rows.append(
            {
                "series": "change",
                "work_per_window_pct": wr["delta_pct"],
                "busy_pct": None
                if None in (wr["after"]["busy_pct"], wr["before"]["busy_pct"])
                else wr["after"]["busy_pct"] - wr["before"]["busy_pct"],
                "range_low_pct": lo,
                "range_high_pct": hi,
            }
        )
        rows += [
            {"series": f"rank {p['rank']} change", "work_per_window_pct": p["delta_pct"]}
            for p in wr["per_rank"]
        ]
    return PlainTable.from_records(rows)


def _diff_table(block: dict[str, Any], keys: list[str], top: int, eff: float) -> PlainTable:
    """Largest changes of time per step; status is by per-instance duration (instances shown)."""
    rows = [
        row
        for row in block["rows"]
        if row["status"] != "unchanged"
        or abs(row["delta_per_step_ns"]) > eff / 100 * row["before_per_step_ns"]
    ]
    by_steps = any(row.get("status_basis") == "time_per_step" for row in rows[:top])
    out = []
    for row in rows[:top]:
        label = {k: (_short(str(row[k])) if k == "name" else row[k]) for k in keys}
        p = row.get("duration_p_value")
        sp = row.get("step_p_value")
        # collectives: their status follows the time per step where both runs have steps
        by_step = (
            {"step_delta_pct": row["step_delta_pct"], "step_p": None if sp is None else f"{sp:.2g}"}
            if by_steps
            else {}
        )
        out.append(
            {
                "status": row["status"],
                **label,
                "before_n": row["before_instances"],
                "after_n": row["after_instances"],
                **by_step,
                "duration_delta_pct": row.get("duration_delta_pct"),
                "duration_p": None if p is None or p != p else f"{p:.2g}",
                "before_ms_per_step": _ms(row["before_per_step_ns"]),
                "after_ms_per_step": _ms(row["after_per_step_ns"]),
                "delta_ms_per_step": _ms(row["delta_per_step_ns"]),
                "delta_ms_total": _ms(row["delta_ns"]),
            }
        )
    return PlainTable.from_records(out)


def _magnitude(value: Any, unit: str) -> Any:
    if value is None:
        return None
    return _ms(value) if unit.startswith("ns") else value


def _findings_table(r: dict[str, Any]) -> PlainTable:
    """Findings matched by cause: the change of what each measures (ms per step, or %)."""
    rows = []
    for c in r["findings"].get("causes", []):
        unit = {"ns_per_step": "ms/step", "ns": "ms"}.get(c["unit"], c["unit"])
        rows.append(
            {
                "change": c["status"],
                "cause": c["cause"],
                "ids": f"{','.join(c['ids_before']) or '-'} -> {','.join(c['ids_after']) or '-'}",
                "before": _magnitude(c["magnitude_before"], c["unit"]),
                "after": _magnitude(c["magnitude_after"], c["unit"]),
                "unit": unit,
                "delta_pct": c["delta_pct"],
                "severity": f"{c['severity_before'] or '-'} -> {c['severity_after'] or '-'}",
            }
        )
    return PlainTable.from_records(rows)


def _lines(r: dict[str, Any]) -> list[str]:
    """One-line facts under the tables: runs, ranks, imbalance, MFU/HFU, notes, gate."""
    lines = []
    for side in ("before", "after"):
        run = r["runs"][side]
        imb = r["imbalance"][side]
        mfu = r["mfu"][side]
        text = (
            f"{side}: {run['input']}: {run['ranks']} ranks, {run['steps']} step windows "
            f"({run['step_source']}); imbalance {imb['verdict'] or 'unknown'}"
        )
        if imb["ratio"] is not None:
            slowest = "unpaired" if imb["slowest_rank"] is None else imb["slowest_rank"]  # --ranks
            text += f" (compute max/mean {imb['ratio']:.3f}, slowest rank {slowest})"
        if imb["straggler_ranks"]:
            text += f", straggler rank {', '.join(map(str, imb['straggler_ranks']))}"
        for key in ("mfu", "hfu"):
            if mfu.get(key) is not None:
                text += f"; {key.upper()} {100 * mfu[key]:.1f}%"
        lines.append(text)
    rk = r["ranks"]
    if rk["only_before"] or rk["only_after"]:
        lines.append(f"ranks only before: {rk['only_before']}; only after: {rk['only_after']}")
    k, c = r["kernels"]["totals"], r["collectives"]["totals"]
    lines.append(
        f"kernel time {_ms(k['before_ns']):,.3f} -> {_ms(k['after_ns']):,.3f} ms "
        f"({_ms(k['delta_ns']):+,.3f} ms); NCCL kernel time {_ms(c['before_ns']):,.3f} -> "
        f"{_ms(c['after_ns']):,.3f} ms ({_ms(c['delta_ns']):+,.3f} ms)"
    )
    lines += [f"note: {n}" for n in r["notes"]]
    if "gate" in r:
        g = r["gate"]
        lines.append(
            f"gate --fail-on-regression {g['threshold_pct']:g}: {'FAIL' if g['failed'] else 'pass'} "
            f"({g['reason']})"
        )
    return lines


def sections(r: dict[str, Any], top: int) -> list[tuple[str, PlainTable]]:
    """The titled tables every text format shows, in order (the verdict's basis first)."""
    eff = r["settings"]["min_effect_pct"]
    steps = ("Step time (slowest rank = the job's pace; per rank)", _step_table(r))
    if r["verdict"].get("basis", "step_time") != "step_time":
        steps = ("Step or capture window time (not the verdict's basis: a run has no steps)", _step_table(r))
    rate = (
        "Work per unit of time (kernels both runs launch, valued at BEFORE's mean duration)",
        _rate_table(r),
    )
    first = [steps, rate] if r["verdict"].get("basis", "step_time") == "step_time" else [rate, steps]
    return first + [
        ("Time partition, ms per step window summed over ranks", _partition_table(r)),
        ("Time partition per rank, ms per step window", _rank_partition_table(r)),
        (
            f"Kernels: largest changes per step (top {top}); faster/slower = per-instance durations",
            _diff_table(r["kernels"], ["name", "category"], top, eff),
        ),
        (
            "Collectives by type and size"
            + (
                "; faster/slower = time per step"
                if any(c.get("status_basis") == "time_per_step" for c in r["collectives"]["rows"])
                else ""
            ),
            _diff_table(r["collectives"], ["op", "bytes"], top, eff),
        ),
        ("Findings matched by cause", _findings_table(r)),
    ]


def markdown(r: dict[str, Any], top: int) -> str:
    """Markdown for PR comments: cells without units by column (the columns name their unit),
    trace text (kernel names, notes, inputs) literal through `render.markdown`."""
    verdict = markdown_text(r["verdict"]["verdict"])
    parts = [f"## nsight-analyze compare: **{verdict}**", "", markdown_text(r["verdict"]["reason"]), ""]
    for title, df in sections(r, top):
        if df.empty:
            continue
        parts += [markdown_table(df, title, units_by_column=False), ""]
    parts += ["- " + markdown_text(line) for line in _lines(r)]
    return "\n".join(parts)


def _settings(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise UserError(f"--set {pair!r}: use NAME=VALUE (names: {', '.join(DEFAULTS)})")
        out[name.strip()] = value.strip()
    return out


def _stale(path: str) -> bool:
    """Whether a workspace's stored analysis is out of date (compare() then recomputes it)."""
    try:
        con = open_workspace(path, read_only=True, analyse=False)
    except UserError:  # busy or unreadable: compare() says so
        return True
    try:
        return analysis.plan(con).needed
    finally:
        con.close()


def _require_traces_data(db: Path, given: str, side: str) -> None:
    """The gate's no-data check for a trace input, worded with the input (not the temporary file)."""
    try:
        require_workspace_data(str(db), "compare")
    except NoData:
        raise NoData(
            f"no data to compare in {given} ({side}): its traces have no GPU operations "
            "(see `nsight-analyze ingest` and `info` on them)"
        ) from None


@click.command("compare")
@click.argument("before", type=click.Path(exists=True))
@click.argument("after", type=click.Path(exists=True))
@output_options(
    db=False,
    html_alias=True,
    unsupported={"csv": "the comparison is several tables of different columns (json: docs/compare.md)"},
)
@click.option(
    "--html",
    "html_out",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help="Also write a self-contained HTML diff here.",
)
@click.option(
    "--fail-on-regression",
    "fail_pct",
    type=float,
    default=None,
    metavar="PCT",
    help="Exit 1 when the run got worse by more than PCT % with confidence (slowest rank's "
    "median step time; without steps, work per unit of time). An input without GPU "
    "operations then exits 4.",
)
@click.option("--no-findings", is_flag=True, help="Skip diagnose on both runs (faster).")
@click.option("--model-flops-per-step", type=float, default=None, help="Model FLOPs per step, for MFU.")
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="NAME=VALUE",
    help=f"Statistics setting ({', '.join(f'{k}={v}' for k, v in DEFAULTS.items())}).",
)
@click.option(
    "--top",
    type=click.IntRange(min=0),  # a negative count sliced rows[:-1]: all but the last, silently
    default=10,
    show_default=True,
    help="Rows of kernel/collective changes shown.",
)
@click.option(
    "--ranks",
    "rank_pairs",
    default=None,
    metavar="B=A[,B=A...]",
    help="Compare BEFORE's rank B with AFTER's rank A (e.g. 3=1; several comma-separated) "
    "[default: ranks matched by number; one rank each: those two].",
)
@click.option(
    "--before-job",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="The job of BEFORE to compare when it holds several [default: the one with the most ranks].",
)
@click.option(
    "--after-job",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="The job of AFTER to compare when it holds several [default: the one with the most ranks].",
)
def command(
    before: str,
    after: str,
    fmt: str,
    html_out: str | None,
    fail_pct: float | None,
    no_findings: bool,
    model_flops_per_step: float | None,
    overrides: tuple[str, ...],
    top: int,
    before_job: int | None,
    after_job: int | None,
    rank_pairs: str | None,
) -> None:
    """Compare two runs. BEFORE and AFTER are workspaces (.duckdb) or trace folders/files.

    Ranks are matched by number (or paired by --ranks; one rank each: those two), steps by
    index, kernels by name, collectives by type and size, findings by the cause they measure.
    The verdict (improvement / regression / neutral) is about the slowest rank's median step
    time, with a seeded bootstrap confidence interval and a Mann-Whitney test, when both runs
    have steps; otherwise about the work done per unit of time (docs/compare.md). Kernels are
    faster/slower by their per-instance durations, collectives by their time per step (by
    durations without steps). An input holding several jobs is compared as one job
    (--before-job/--after-job, else its largest). Differences of setup (GPU, world size, NCCL,
    CUPTI, GEMM precision) head the verdict.
    """
    gate = fail_pct is not None
    options = dict(
        settings=_settings(overrides),
        findings=not no_findings,
        model_flops_per_step=model_flops_per_step,
        fail_on_regression_pct=fail_pct,
        ranks=rank_pairs,
    )
    resolve_settings(options["settings"])  # a bad --set fails before any trace is ingested
    parse_rank_map(rank_pairs)  # so does a malformed --ranks
    if gate:
        check_gate(fail_pct)  # so does a bad --fail-on-regression
    validate_positive("--model-flops-per-step", model_flops_per_step)  # MFU would hide it as "unknown"
    given = {"before": before, "after": after}
    traces = [side for side in SIDES if not is_workspace(Path(given[side]))]
    stale = False
    spinning = progress_wanted()  # elsewhere no spinner draws: no open of each workspace to ask
    for path in dict.fromkeys(given[side] for side in SIDES if side not in traces):
        if gate:  # a CI gate never passes on no data (exit 4, like diagnose)
            require_workspace_data(path, "compare")
        stale = stale or (spinning and _stale(path))
    # a stale workspace draws the analysis' own bar while compare() recomputes it: no spinner then
    with Spinner("compare", enabled=not stale) as spinner:
        if traces:
            spinner.say(f"compare: ingesting the {' and '.join(traces)} traces")
        with workspaces(before, after, (before_job, after_job)) as (db_b, db_a, notes):
            if gate:
                for side, db in zip(SIDES, (db_b, db_a)):
                    if side in traces:
                        _require_traces_data(db, given[side], side)
            spinner.say("compare: comparing the runs" + ("" if no_findings else " (and diagnosing both)"))
            result = compare_prepared(db_b, db_a, notes, **options)  # opened once, by workspaces()
        for side in SIDES:  # compare() saw the temporary workspaces of trace inputs
            result["runs"][side]["input"] = str(given[side])
        if html_out:
            from ..render.compare_html import write_html

            spinner.say(f"compare: writing {html_out}")
            write_html(result, Path(html_out))
    if fmt == "json":
        print(to_json(result))
    elif fmt == "markdown":
        print(markdown(result, top))
    else:
        click.echo(wrap(result["verdict"]["reason"], hang="    "))
        for title, df in sections(result, top):
            if not df.empty:
                print_table(df, title)
        for line in _lines(result):  # paths and names are trace text
            click.echo(wrap(line, indent="  ", hang="    "))
    if html_out:
        click.echo(f"wrote {html_out}", err=True)
    if result.get("gate", {}).get("failed"):
        sys.exit(1)
