"""`nsight-analyze ingest DIR`: load every per-rank export below DIR into one workspace."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ..clihelp import env_db, step_pattern_option
from ..errors import UserError
from ..ingest.run import FileOutcome, ingest
from ..render.escape import clean
from ..render.table import PlainTable
from ..render.terminal import print_table
from ..store.query_layer import statements
from ..store.workspace import open_workspace
from .summary import periodic_steps_option


@click.command("ingest")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Workspace file [default: $NSIGHT_ANALYZE_DB, else DIR/nsight_analyze.duckdb].",
)
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(1, 1024),
    default=None,
    help="Worker processes that read the files and compute their rank-local results "
    "[default: the machine's cores; inputs under 64 MB in all, or machines of fewer than 4 cores, "
    "load in this process]. 1: no workers.",
)
@click.option(
    "--dask",
    metavar="ADDRESS",
    default=None,
    help="Run the per-file tasks on a Dask cluster: local:N (N worker processes started for this run), "
    "a scheduler address (tcp://host:8786) or a scheduler file (scheduler.json). Workers must see the "
    "input files. Needs pip install 'nsight-analyze[dask]'.",
)
@click.option("--replace", is_flag=True, help="Re-ingest files already in the workspace.")
@click.option(
    "--rules",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Extra kernel classification rules (CSV: priority,pattern,category,subcategory,note).",
)
@click.option("--quiet", "-q", is_flag=True, help="Only the closing summary.")
@click.option(
    "--label",
    "label",
    multiple=True,
    metavar="KEY=VALUE",
    help="A label of the runs these files make (repeatable), e.g. --label batch=32 --label tp=2; "
    "besides those of a run.toml / run.json beside the traces, which must agree (`runs` reads them).",
)
@click.option(
    "--analyze",
    metavar="WHAT",
    default=None,
    help="The analysis computed now: first (the time partition, steps, ranks, collectives: what "
    "`summary` and `ranks` read), all, or table names (comma-separated) [default: first]. The rest "
    "is computed the first time a command reads it, and stored.",
)
@step_pattern_option
@periodic_steps_option
def command(
    inputs: tuple[Path, ...],
    db: Path | None,
    jobs: int | None,
    dask: str | None,
    replace: bool,
    rules: Path | None,
    quiet: bool,
    label: tuple[str, ...],
    analyze: str | None,
    step_pattern: str | None,
    periodic_steps: bool | None,
):
    """Read every trace below INPUTS into one DuckDB workspace: nsys exports (.sqlite; .nsys-rep
    and .qdrep through the nsys CLI), nsys recipe outputs (folders or zips), PyTorch-profiler
    (Kineto) JSON, Nsight Compute reports (.ncu-rep, CSV) and DCGM metrics (dcgm-exporter
    scrapes, Prometheus JSON, dcgmi dmon tables).

    Each file is read and its rank-local results computed (by worker processes or a Dask
    cluster with --jobs/--dask); the client lands each file in the workspace as it comes back,
    then computes the job-level results. Re-running processes only new or changed files.

    Exits 1 when a file failed or nothing was loaded; a workspace that did not exist before is then
    not created, one that did keeps its data (only the list of files not loaded is updated).
    """
    if dask is not None and not dask.strip():  # an unset variable ("--dask $SCHED") ran locally
        raise UserError(
            f"--dask {dask!r}: give a scheduler address (tcp://HOST:8786), a scheduler file or local:N"
        )
    if db is None:
        db = workspace_path(inputs)
    if step_pattern is not None:  # a bad regex is said before anything is read
        from .summary import check_step_pattern

        check_step_pattern(step_pattern)
    from ..run_labels import parse_cli_labels

    labels = parse_cli_labels(label)  # a malformed or twice-given label is said before anything is read
    from ..analysis import parse_analyze

    wanted = parse_analyze(analyze)  # an unknown table is said before anything is read
    existed = db.exists()
    with IngestProgress(enabled=not quiet) as progress:
        report = ingest(
            list(inputs),
            db,
            jobs=jobs,
            dask=dask,
            replace=replace,
            rules=rules,
            progress=progress.update,
            analysis_progress=progress.analysis,
            labels=labels,
            analyze=wanted,
        )
    # unchanged: already in the workspace; a new workspace with nothing in it is removed by ingest()
    loaded = db.exists() and bool(report.by_status("ok") or report.by_status("unchanged"))
    for outcome in report.outcomes:
        if any(outcome is said for said in progress.said):  # its one line was printed as it came back
            continue
        if outcome.status in ("failed", "skipped") or (
            outcome.status in ("unchanged", "ignored") and (not quiet or not loaded)
        ):
            click.echo(outcome_line(outcome), err=True)
    for note in report.notes:
        click.echo(f"note: {clean(note)}", err=True)
    counts = (
        f"{len(report.by_status('ok'))} file(s) ingested, {len(report.by_status('unchanged'))} unchanged, "
        f"{len(report.by_status('failed'))} failed, {len(report.by_status('skipped'))} skipped, "
        f"{len(report.by_status('ignored'))} ignored"
    )
    if not loaded:
        kept = f"{clean(db)} keeps its data" if existed else f"no workspace written at {clean(db)}"
        click.echo(f"nothing ingested ({counts}): {kept}")
        sys.exit(1)
    if step_pattern is not None or periodic_steps is not None:  # stored, and the steps recomputed now
        from .summary import apply_periodic_steps, apply_step_pattern

        apply_step_pattern(str(db), step_pattern)
        apply_periodic_steps(str(db), periodic_steps)
        open_workspace(db, needs=None).close()
    _closing_table(db)
    click.echo(f"workspace {clean(db)}: {counts}")
    if report.failed:
        sys.exit(1)


def workspace_path(inputs: tuple[Path, ...]) -> Path:
    """--db not given: $NSIGHT_ANALYZE_DB (as for every other command), else beside the first input."""
    env = env_db()
    if env:
        return Path(env)
    first = inputs[0]
    return (first if first.is_dir() else first.parent) / "nsight_analyze.duckdb"


def outcome_line(outcome: FileOutcome) -> str:
    """A file that was not loaded (or unchanged), in one line: the progress and the closing
    summary print the same words, and each file's line only once."""
    return f"{outcome.status}: {clean(outcome.path)}: {clean(outcome.message)}"


def progress_wanted() -> bool:
    """Whether to draw progress: only when stderr is a terminal (never in pipes, files or CI logs,
    whose readers get the plain lines instead), and not on a terminal that cannot move its cursor."""
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced by an object without it, or closed
        return False
    return tty and os.environ.get("TERM", "") != "dumb"


def _console():
    from rich.console import Console

    return Console(stderr=True)


class Spinner:
    """A spinner with the elapsed time on stderr while a command works, when it is a terminal.

    Transient (the line disappears when done) and silent elsewhere. `say(text)` changes what it
    shows; nothing else may draw on the terminal while it runs (stop it first).
    """

    def __init__(self, text: str, enabled: bool = True):
        self.text = text
        self.enabled = enabled and progress_wanted()
        self.bar = None

    def __enter__(self) -> Spinner:
        if self.enabled:
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self.bar = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                console=_console(),
                transient=True,
                redirect_stdout=False,  # stdout stays the command's output
            )
            self.bar.start()
            self.task = self.bar.add_task(self.text, total=None)
        return self

    def say(self, text: str) -> None:
        self.text = text
        if self.bar is not None:
            self.bar.update(self.task, description=text)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


class IngestProgress:
    """A bar with rows/s on a terminal; one line per file elsewhere (CI logs stay readable).

    After the last file the same bar follows the analysis ("computing the analysis": its rank
    batches, then the job step), which ingest computes before it returns.
    """

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.tty = enabled and progress_wanted()
        self.bar = None
        self.said: list[FileOutcome] = []  # outcomes whose line was printed (not said again)

    def __enter__(self) -> IngestProgress:
        if self.tty:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(
                TextColumn("{task.fields[phase]}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.description}"),
                console=_console(),
                transient=True,
                redirect_stdout=False,  # stdout stays the command's output
            )
            self.bar.start()
            self.task = self.bar.add_task("", total=None, phase="ingest")
        return self

    def update(self, outcome: FileOutcome, done: int, total: int) -> None:
        rows = sum(outcome.counts.values())
        rate = f"{rows / outcome.seconds:,.0f} rows/s" if outcome.seconds > 0 else ""
        if self.bar is not None:
            from rich.markup import escape

            name = escape(clean(outcome.path.name))  # a name's "[red]" is not rich markup
            self.bar.update(self.task, completed=done, total=total, description=f"{name} {rate}")
            if done == total:  # ingest() computes the analysis next
                self.analysis(0, 0)
        elif self.enabled and outcome.status != "ok":  # its reason now, and not again in the summary
            click.echo(outcome_line(outcome), err=True)
            self.said.append(outcome)
        elif self.enabled:
            detail = ", ".join(filter(None, [f"{rows:,} rows", rate]))
            click.echo(
                f"{outcome.status}: {clean(outcome.path)} ({detail}) {clean(outcome.message)}".rstrip(),
                err=True,
            )

    def analysis(self, done: int, total: int) -> None:
        """analysis.refresh's progress: `done` of `total` rank batches (0, 0: starting)."""
        if self.bar is None:
            return
        if done and done == total:  # the rank batches are done: the job step runs (no steps to count)
            self._analysis_task("the job: clocks, collectives, waits")
        elif done:
            self.bar.update(self.task, completed=done, total=total, description="ranks")
        else:
            self._analysis_task("ranks")

    def _analysis_task(self, what: str) -> None:
        """A fresh task (a pulsing bar: its total is unknown) in place of the current one."""
        self.bar.update(self.task, visible=False)
        self.task = self.bar.add_task(what, total=None, phase="computing the analysis")

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


PER_RANK_ROWS = 16  # above this many ranks the closing table has one row per host
SQL = statements("commands/ingest")


def _closing_table(db: Path) -> None:
    """What landed, one row per rank, or per host for a larger job (thousands of rank rows are
    noise at the end of an ingest; `nsight-analyze ranks` lists them)."""
    con = open_workspace(db, read_only=True, needs=None)  # the first answers: what ingest computed
    try:
        ranks = SQL["landed_ranks"]
        n = con.execute("SELECT count(*) FROM ranks").fetchone()[0]
        if n <= PER_RANK_ROWS:
            df = PlainTable.from_cursor(con.execute(SQL.sql("ranks_in_order", ranks=ranks)))
            title = "ranks in the workspace"
        else:
            df = PlainTable.from_cursor(con.execute(SQL.sql("landed_hosts", ranks=ranks)))
            title = f"{n} ranks in the workspace, per host (`nsight-analyze ranks` lists every rank)"
    finally:
        con.close()
    if len(df):  # a PlainTable, not a DataFrame: pandas costs an ingest 0.3 s to import
        print_table(df, title=title)
