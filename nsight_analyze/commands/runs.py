"""`nsight-analyze runs`: one row per run of the workspace, a sweep by label, a scaling series."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..clihelp import output_options
from ..errors import UserError
from ..render.data import to_json
from ..render.escape import clean
from ..render.markdown import markdown_text
from ..render.output import emit
from ..render.table import PlainTable
from ..render.terminal import echo
from ..runs import READS, RunsResult, common_labels, parse_pairs, runs
from ..runs.scaling import LOSS_PARTS, scaling_line
from ..runs.select import find_run, regression_pair
from ..store.workspace import open_workspace

_COLUMNS = (
    "run", "name", "labels", "ranks", "gpu", "steps", "step_median_ns", "step_p95_ns", "steps_per_s",
    "samples_per_s", "tokens_per_s", "mfu_pct", "hfu_pct", "compute_pct", "memory_pct",
    "memory_kernels_pct", "copies_pct", "exposed_comms_pct", "idle_pct", "overlap_pct",
    "memory_peak_gib", "straggler", "straggler_delay_ns", "top_finding",
)  # fmt: skip
# the table's columns shown only when some run has them (JSON and CSV keep every column)
_OPTIONAL = (
    "name", "labels", "samples_per_s", "tokens_per_s", "mfu_pct", "hfu_pct", "memory_peak_gib", "top_finding",
)  # fmt: skip


def _pct(value: Any) -> float | None:
    return None if value is None else 100.0 * value


def _records(result: RunsResult, common: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The table's rows: user labels as 'k=v' text (trace labels have their own columns), less
    the `common` ones."""
    out = []
    for r in result.rows:
        shown = {k: v for k, v in r["user_labels"].items() if k != "name" and k not in (common or {})}
        verdict = r["straggler_verdict"]
        out.append(
            {
                "run": r["job"],
                "name": r["name"],
                "labels": " ".join(f"{k}={v}" for k, v in sorted(shown.items())),
                "ranks": r["ranks_label"],
                "gpu": r["gpu"],
                "steps": r["steps"],
                "step_median_ns": r["step_median_ns"],
                "step_p95_ns": r["step_p95_ns"],
                "steps_per_s": r["steps_per_s"],
                "samples_per_s": r["samples_per_s"],
                "tokens_per_s": r["tokens_per_s"],
                "mfu_pct": _pct(r["mfu"]),
                "hfu_pct": _pct(r["hfu"]),
                "compute_pct": _pct(r["compute_share"]),
                "memory_pct": _pct(r["memory_share"]),
                "memory_kernels_pct": _pct(r["memory_kernels_share"]),
                "copies_pct": _pct(r["copies_share"]),
                "exposed_comms_pct": _pct(r["exposed_comms_share"]),
                "idle_pct": _pct(r["idle_share"]),
                "overlap_pct": _pct(r["overlap"]),
                "memory_peak_gib": r["memory_peak_gib"],
                "straggler": (f"rank {r['straggler_rank']}" if r["straggler_rank"] is not None else verdict),
                "straggler_delay_ns": r["straggler_delay_ns"],
                "top_finding": r["top_finding"],
            }
            | ({"when": r.get("when")} if result.over else {})
            | ({"best": "best" if r.get("best") else ""} if result.metric else {})
        )
    return out


def _dimension_records(result: RunsResult) -> list[dict[str, Any]]:
    """One row per run and parallelism dimension (comm_groups): a dimension that stops scaling
    shows as exposed time per rank growing, or bus bandwidth falling, along the runs."""
    out = []
    for r in result.rows:
        for d in r["comms_by_dimension"]:
            out.append(
                {
                    "run": r["job"],
                    "name": r["name"],
                    "dimension": d["dimension"],
                    "ops": d["ops"],
                    "link": d["link"],
                    "total_per_rank_ns": d["total_per_rank_ns"],
                    "exposed_per_rank_ns": d["exposed_per_rank_ns"],
                    "exposed_share_pct": _pct(d["exposed_share"]),
                    "busbw_gbps": d["busbw_gbps"],
                }
            )
    return out


def _scaling_records(series: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for e in series["runs"]:
        row = {
            "run": e["job"],
            "name": e["name"],
            "gpus": e["gpus"],
            "efficiency_pct": _pct(e["efficiency"]),
            "step_ns": e.get("step_ns"),
            "ideal_step_ns": e.get("ideal_step_ns"),
            "loss_ns": e.get("loss_ns"),
        }
        for p in LOSS_PARTS:
            row[f"{p}_points"] = e["loss"][p]["points"] if e["efficiency"] is not None else None
        row["unknown"] = e["unknown"] or ""
        out.append(row)
    return out


def _json(result: RunsResult) -> dict[str, Any]:
    keep = [k for k in result.rows[0] if k not in ("user_labels",)] if result.rows else []
    return {
        "runs": [{k: r[k] for k in keep} | {"user_labels": r["user_labels"]} for r in result.rows],
        "by": result.by,
        "scaling": result.scaling,
        "notes": result.notes,
    }


@click.command("runs")
@output_options()
@click.option(
    "--where",
    "where",
    multiple=True,
    metavar="KEY=VALUE",
    help="Only the runs with this label value (repeatable; numbers compare as numbers: batch=32 "
    "matches 32.0).",
)
@click.option(
    "--by",
    "by",
    metavar="KEY",
    default=None,
    help="Sort the runs by this label (a sweep): numerically when its values are numbers.",
)
@click.option(
    "--scaling",
    type=click.Choice(["strong", "weak"]),
    default=None,
    help="Scaling efficiency of each run against --baseline: strong (same global work: T_base*N_base/(T*N)) "
    "or weak (same work per GPU: T_base/T) [default: the runs' `scaling` label, else none].",
)
@click.option(
    "--baseline",
    metavar="RUN",
    default=None,
    help="The baseline run (number or name) [default: the run with the fewest GPUs].",
)
@click.option(
    "--compare",
    "compare_runs",
    nargs=2,
    metavar="A B",
    default=None,
    help="Compare run A (before) with run B (after), numbers or names: `compare` on the two jobs.",
)
@click.option(
    "--fail-on-regression",
    "fail_pct",
    type=float,
    metavar="PCT",
    default=None,
    help="CI gate: compare the newest run with the best earlier run of the same labels (`compare "
    "--fail-on-regression PCT`: exit 1 when it regressed by more than PCT %).",
)
@click.option(
    "--findings",
    is_flag=True,
    help="Add each run's top diagnose finding (runs diagnose once per run: slower).",
)
@click.option(
    "--hfu",
    is_flag=True,
    help="Add each run's HFU from counted FLOPs (Nsight Compute counters), as `mfu --job N` "
    "computes it (once per run: slower).",
)
@click.option(
    "--over",
    type=click.Choice(["time"]),
    default=None,
    help="A history: the runs in time order (their `date` labels, else the capture start) with the "
    "best run by --metric marked.",
)
@click.option(
    "--metric",
    default=None,
    help="With --over time or --by KEY: the metric whose best run is marked (step_median_ns, "
    "steps_per_s, samples_per_s, tokens_per_s, mfu, ...) [default: --over: step_median_ns; --by: "
    "samples_per_s, else tokens_per_s when every run has it, else step_median_ns].",
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the runs page (efficiency curve with the loss stacked under it, step time and "
    "MFU against the label, the history, communication per dimension): one offline HTML file.",
)
def command(
    db: str,
    fmt: str,
    where: tuple[str, ...],
    by: str | None,
    scaling: str | None,
    baseline: str | None,
    findings: bool,
    hfu: bool,
    compare_runs: tuple[str, str] | None,
    fail_pct: float | None,
    over: str | None,
    metric: str | None,
    html_path: Path | None,
) -> None:
    """One row per run (job) of the workspace: its labels (run.toml / run.json beside the traces,
    `ingest --label`) and what the traces carry (ranks, GPU), the job step time (median, p95),
    steps/s, MFU (label model_flops_per_step), the time partition's shares, overlap and the
    straggler, samples/s and tokens/s (labels samples_per_step or global_batch, tokens_per_step),
    communication per parallelism dimension. --where and --by select and sort a sweep; --over time
    is a history with the best run marked; --scaling (or labels scaling=strong|weak)
    gives each run's scaling efficiency against a baseline and where the loss goes; --compare
    and --fail-on-regression hand two runs to `compare`. docs/runs.md.
    """
    if metric is not None and over is None and by is None:
        raise UserError("--metric goes with --over time or --by KEY (the run it marks best)")
    wanted = parse_pairs(where, "--where")
    needs = list(READS)
    if findings:
        from ..diagnose import READS as DIAGNOSE_READS

        needs += DIAGNOSE_READS
    if hfu:
        from ..mfu import READS as MFU_READS

        needs += MFU_READS
    con = open_workspace(db, read_only=True, must_exist=True, needs=needs)
    try:
        pair = bool(compare_runs) or fail_pct is not None  # two runs for `compare`, not a series
        result = runs(
            con,
            wanted,
            by,
            scaling,
            baseline,
            findings and not pair,
            series=not pair,
            over=over,
            metric=metric,
            hfu=hfu and not pair,
        )
    finally:
        con.close()
    if compare_runs or fail_pct is not None:
        _compare(db, fmt, result, compare_runs, fail_pct)
        return
    if html_path is not None:
        from ..render.report.runs_page import write_runs_page

        written = write_runs_page(result, html_path)
        echo(f"runs page: {clean(str(written.resolve()))}", err=True)
    if fmt == "json":
        print(to_json(_json(result)))
        return
    if fmt == "csv":  # one rectangular table (every label kept): the series' columns beside each run's
        records = _records(result)
        series = {e["run"]: e for e in _scaling_records(result.scaling)} if result.scaling else {}
        merged = [r | {k: v for k, v in series.get(r["run"], {}).items() if k not in r} for r in records]
        extra = (["when"] if result.over else []) + (["best"] if result.metric else [])
        columns = list(_COLUMNS) + extra + [k for k in (next(iter(series.values()), {})) if k not in _COLUMNS]
        emit(PlainTable.from_records(merged, columns), fmt)
        for note in result.notes:
            echo(f"note: {clean(note)}", err=True)
        return
    common = common_labels(result)
    records = _records(result, common)
    drop = {c for c in _OPTIONAL if all(not r[c] for r in records)}
    shown = [c for c in _COLUMNS if c not in drop] + (["when"] if result.over else [])
    shown += ["best"] if result.metric else []
    table = PlainTable.from_records(records, shown)
    title = f"runs by {result.by} (best: {result.metric})" if result.by else "runs"
    if result.over:
        title = f"runs over time (best: {result.metric})"
    if common:
        title += " · every run: " + clean(" ".join(f"{k}={v}" for k, v in sorted(common.items())))
    emit(table, fmt, title)
    dims = _dimension_records(result)
    if dims:
        if fmt == "markdown":
            print()
        emit(PlainTable.from_records(dims), fmt, "communication per parallelism dimension")
    if result.scaling is not None:
        s = result.scaling
        stitle = f"{s['mode']} scaling against run {s['baseline']}"
        if fmt == "markdown":
            print()
        emit(PlainTable.from_records(_scaling_records(s)), fmt, stitle)
        if fmt in ("table", "markdown"):
            if fmt == "markdown":
                print()
            for e in s["runs"]:
                line = scaling_line(e)
                print(f"- {markdown_text(line)}" if fmt == "markdown" else clean(line))
    for note in result.notes:
        if fmt == "markdown":
            print(markdown_text(f"note: {note}"))
        else:
            echo(f"note: {clean(note)}", err=True)
    if not result.rows and fmt == "table":
        echo("no run matches" + (" --where " + " ".join(where) if where else ""), err=True)


def _compare(
    db: str, fmt: str, result: RunsResult, pair: tuple[str, str] | None, fail_pct: float | None
) -> None:
    """`compare DB DB --before-job A --after-job B` (its statistics, output and gate, unchanged):
    the two runs named, or for the gate the newest run and the best earlier one of its labels."""
    from . import compare as compare_command

    if pair:
        before, after = (find_run(result.rows, ref, "--compare") for ref in pair)
    else:
        after, before, why = regression_pair(result.rows, result.notes)
        if before is None:
            for note in result.notes:
                echo(f"note: {clean(note)}", err=True)
            click.echo(
                f"--fail-on-regression: {why} as the newest run {after['job']}: nothing to compare, pass"
            )
            return
    for note in result.notes:
        echo(f"note: {clean(note)}", err=True)
    echo(f"runs: comparing run {before['job']} (before) with run {after['job']} (after)", err=True)
    click.get_current_context().invoke(
        compare_command.command,
        before=db,
        after=db,
        before_job=before["job"],
        after_job=after["job"],
        fmt=fmt,
        fail_pct=fail_pct,
    )
