"""The Python API: the same answers as the CLI, as pandas DataFrames (or Arrow tables) and dicts.

```python
import nsight_analyze as na

ws = na.open("job.duckdb")                 # or: ws = na.ingest("traces/", db="job.duckdb")
ws.partition(by="rank")                    # where each rank's GPU time goes (ns)
ws.ranks()                                 # clock offset, compute, waits suffered/caused (ns)
ws.collectives()                           # every matched NCCL operation, its skew and bandwidth
ws.findings()                              # ranked causes with recoverable time per step (ns)
ws.mfu(model_flops_per_step=4.2e15)        # MFU/HFU per step (fractions of the dense peak)
ws.sql("SELECT * FROM time_partition")     # any documented table or view
ws.report("r.html")                        # the self-contained HTML report
na.compare("before.duckdb", "after.duckdb")
```

The CLI is a thin layer over this module: each command calls a `Workspace` method (or the
library function the method calls) and only renders what it returns, so `nsight-analyze X
--format json` and `ws.X()` give the same numbers. Units: every `*_ns` value is integer
nanoseconds (windows, durations, waits; `start_ns`/`end_ns` are timestamps on the aligned
clock), `*_pct` a percentage (0-100), `*_bytes`/`bytes` bytes; MFU/HFU are fractions (0.42 =
42 % of the dense peak). Definitions: docs/metrics.md; columns of the views: queries/*.sql.

A `Workspace` holds no connection between calls (each call opens the DuckDB file read-only and
closes it), so another process may ingest into the same file between two calls; use
`ws.connect()` for several queries on one connection. Stale stored results (the files,
settings or queries changed) are recomputed on the first call, as the CLI does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # imported lazily: `import nsight_analyze` stays light
    import duckdb
    import pandas as pd
    import pyarrow as pa

    from .diagnose import Diagnosis, Finding
    from .ingest import IngestReport
    from .mfu_options import MfuOptions
    from .render.table import PlainTable

from .api_frames import mfu_frame, rank_report, rank_report_json, run_sql

PathArg = str | PathLike[str]
By = Literal["rank", "step", "rank-step"]


def _frame(rows: Sequence[dict[str, Any]] | pd.DataFrame, arrow: bool, columns: list[str] | None = None):
    """A DataFrame of JSON-ready rows (the numbers the CLI's JSON prints), or its Arrow table."""
    import pandas as pd

    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows), columns=columns)
    if not arrow:
        return df
    import pyarrow as pa

    return pa.Table.from_pandas(df, preserve_index=False)


FINDING_COLUMNS = [
    "rank",
    "severity",
    "id",
    "title",
    "recoverable_ns_per_step",
    "recoverable_pct",
    "ranks",
    "steps",
    "summary",
    "recoverable_method",
]


def findings_table(findings: Sequence[Finding]) -> PlainTable:
    """One row per finding, in rank order (the `diagnose` overview, raw values), as plain rows:
    `diagnose --format csv` prints them without pandas."""
    from .render.table import PlainTable

    return PlainTable(
        FINDING_COLUMNS,
        [
            (
                f.rank,
                f.severity,
                f.id,
                f.title,
                f.recoverable_ns_per_step,
                f.recoverable_pct,
                list(f.ranks),
                list(f.steps),
                f.summary,
                f.recoverable_method,
            )
            for f in findings
        ],
    )


def findings_frame(findings: Sequence[Finding]) -> pd.DataFrame:
    """`findings_table` as a DataFrame."""
    import pandas as pd

    return pd.DataFrame(findings_table(findings).rows, columns=FINDING_COLUMNS)


# ------------------------------------------------------------------------------------------------
# The workspace object


class Workspace:
    """One nsight-analyze workspace (a DuckDB file made by `ingest`).

    Every method opens the file, answers and closes it (see the module docstring). Methods
    returning tables take `arrow=True` for a `pyarrow.Table` instead of a pandas DataFrame.
    """

    ingest_report: IngestReport | None = None  # set by na.ingest: the per-file outcomes

    def __init__(self, path: PathArg, job: int | None = None):
        self.path = Path(path)
        self.job = job  # the job one-job methods show (job_scope.py); None: the one with most ranks
        self.scope: Any = None  # the JobScope the last scoped call showed (None: a single job)

    def __repr__(self) -> str:
        return f"Workspace({str(self.path)!r})"

    def __fspath__(self) -> str:
        return str(self.path)

    # -- connections ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def connect(
        self,
        read_only: bool = True,
        analyse: bool = True,
        scope: bool | None = None,
        needs: Iterable[str] | str | None = "all",
    ) -> Iterator[duckdb.DuckDBPyConnection]:
        """A DuckDB connection with the documented tables and views, closed on exit.

        read_only=False lets statements change the workspace (and takes its write lock);
        analyse=False skips recomputing stale stored results (the raw tables only); scope=True
        shows one job only (self.job, else the largest; job_scope.py), None: when self.job is set.
        `needs`: the stored results the caller reads, computed first if missing or stale
        ("all"; None: the first answers, which an ingest computed; or names of tables or views)."""
        from .job_scope import scope as scope_job
        from .workspace import open_workspace

        con = open_workspace(self.path, read_only=read_only, must_exist=True, analyse=analyse, needs=needs)
        try:
            if scope or (scope is None and self.job is not None):
                self.scope = scope_job(con, self.job)
            yield con
        finally:
            con.close()

    def sql(self, query: str, arrow: bool = False, write: bool = False) -> pd.DataFrame | pa.Table | None:
        """Run one DuckDB SQL statement on the workspace (read-only unless `write`).

        The tables and views are documented in docs/metrics.md and queries/*.sql (integer ns
        times). Returns None for a statement without a result (CREATE, INSERT, ...)."""
        from .query_layer import names_in

        needs = names_in(query) if isinstance(query, str) else None  # run_sql says what is wrong
        with self.connect(read_only=not write, needs=needs) as con:
            return run_sql(con, query, arrow=arrow)

    # -- what is in it ----------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """Files, versions, jobs, ranks, event counts, time span and warnings (`info --format json`).

        `span` rows: per rank, first_ns/last_ns, the earliest start and latest end of a GPU
        operation on the rank's own (unaligned) clock."""
        from .commands.info import workspace_info

        with self.connect(analyse=False) as con:  # the tables only: no stored results needed
            return workspace_info(con)

    def gpus(
        self,
        peak_tflops: float | None = None,
        precision: str | None = None,
        gpu: str | None = None,
        arrow: bool = False,
    ) -> pd.DataFrame | pa.Table:
        """Per rank: GPU name, matched peak-table model, how the peak was found (`source`), the dense
        peak `peak_tflops` (TFLOP/s, for `precision`; NaN = unknown), memory bandwidth `mem_bw_gbs`
        (GB/s) and the roofline ridge point (FLOP/byte). `gpu` states the model; `peak_tflops`
        overrides the table."""
        from .gpus import DEFAULT_PRECISION, rank_peaks, validate_gpu

        validate_gpu(gpu)
        with self.connect(needs=None) as con:
            df = rank_peaks(con, peak_tflops=peak_tflops, precision=precision or DEFAULT_PRECISION, gpu=gpu)
        return _frame(df, arrow)

    def ncu_peaks(self, precision: str | None = None, arrow: bool = False) -> pd.DataFrame | pa.Table:
        """Per hardware-counter file (Nsight Compute, or a Kineto trace with CUPTI range-profiler
        counters): the dense peak (TFLOP/s) and memory bandwidth (GB/s) its roofline ridge points
        use, and where they came from."""
        from .gpus import DEFAULT_PRECISION, ncu_peaks_sql

        sql = ncu_peaks_sql(precision or DEFAULT_PRECISION)
        with self.connect(needs=None) as con:
            df = con.execute(sql).df()
        return _frame(df, arrow)

    def classify(
        self,
        rules: PathArg | None = None,
        by: Literal["category", "subcategory", "other"] = "category",
        arrow: bool = False,
    ) -> pd.DataFrame | pa.Table:
        """Re-apply the kernel rules (plus `rules`, a CSV kept in the workspace) and return kernel
        time per category (by='category'), per category and subcategory, or the kernel names no
        rule classifies (by='other'): kernels/instances counts, `total_ns` summed over all ranks
        (ns), `pct` of all kernel time. Writes the workspace (the categories are stored)."""
        from .classify import COVERAGE_VIEWS, reclassify_all

        if by not in COVERAGE_VIEWS:
            raise ValueError(f"by must be one of {', '.join(COVERAGE_VIEWS)}, not {by!r}")
        with self.connect(read_only=False) as con:
            reclassify_all(con, Path(rules) if rules is not None else None)
            return _frame(con.execute(f"SELECT * FROM {COVERAGE_VIEWS[by]}").df(), arrow)

    # -- where the time goes ----------------------------------------------------------------------

    def summary(self, by: By = "rank") -> dict[str, Any]:
        """Everything `nsight-analyze summary` shows (`--format json`): {by, partition,
        step_source, top_kernels, no_timeline, warnings, notes, job}; see `partition` for the rows."""
        from .summary import summary

        with self.connect(needs=None, scope=True) as con:
            out = summary(con, by=by)
        return {**out, "job": self.scope.as_dict() if self.scope else None}

    def partition(self, by: By = "rank", arrow: bool = False) -> pd.DataFrame | pa.Table:
        """The GPU time partition: one row per rank (by='rank', the whole capture), per step
        (by='step') or per rank and step (by='rank-step').

        Columns (ns): `window_ns` is tiled exactly by compute_ns + memory_ns + other_ns +
        comms_exposed_ns (communication no compute or memory operation overlaps) + idle_ns (no
        GPU operation); idle_ns splits into launch_gap_ns, input_stall_ns, sync_stall_ns,
        host_bound_ns and idle_other_ns. comms_total_ns is all communication time,
        comms_hidden_ns the part overlapped by compute; overlap_pct = hidden / total. memory_ns
        splits into memory_kernels_ns (memory-bound kernels) and copies_ns (memcpy / memset no
        kernel overlaps); copies_total_ns is all copy time. Each `*_pct`
        is that column's share of the window. by='step' rows hold sums over the `ranks` that
        have the step (rank-ns: divide by `ranks` for the mean rank), plus `job_step_ns` (the
        longest window over the ranks: the job's step time), `slowest_rank` and `min_window_ns`.
        """
        from .summary import partition

        with self.connect(needs=None, scope=True) as con:
            return _frame(partition(con, by), arrow)

    def top_kernels(self, limit: int = 10, arrow: bool = False) -> pd.DataFrame | pa.Table:
        """The kernels with the most GPU time summed over all ranks: instances, total_ns (ns),
        pct (of all kernel time)."""
        from .summary import top_kernels

        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError(f"limit must be a whole number >= 0, not {limit!r}")
        with self.connect(needs=None, scope=True) as con:
            return _frame(top_kernels(con, limit), arrow)

    # -- ranks, collectives, stragglers -----------------------------------------------------------

    def rank_report(self) -> dict[str, Any]:
        """The document of `nsight-analyze ranks --format json`: jobs, ranks, alignment, the
        straggler verdict per job, and the NCCL kernels no wait could be computed for."""
        from .whatif import READS  # its "why each rank is slow"

        with self.connect(needs=READS) as con:
            return rank_report_json(rank_report(con))

    def whatif(self) -> dict[str, Any]:
        """The document of `nsight-analyze whatif --format json` (docs/whatif.md): per step and for
        the whole job, the step time if each cause went away (the measured dependencies replayed)."""
        from .whatif import READS, document

        with self.connect(needs=READS, scope=True) as con:
            return document(con)

    def ranks(self, arrow: bool = False) -> pd.DataFrame | pa.Table:
        """One row per rank: job, host, device, GPU, `clock_offset_ns` (added to the rank's
        timestamps to put it on the job's clock) and its alignment residuals (p50/p95 ns),
        `compute_ns` (whole capture), `wait_suffered_ns` (time its NCCL kernels waited for later
        ranks), `wait_caused_ns` (GPU time the other ranks waited for it), `times_slowest`
        (imbalanced steps it was slowest in), `times_last` (collectives it arrived last at),
        `cost_ns` (the job's delay it caused, for the straggler) and `straggler`."""
        return _frame(self.rank_report()["ranks"], arrow)

    def collectives(self, arrow: bool = False) -> pd.DataFrame | pa.Table:
        """One row per NCCL operation instance matched across ranks (queries/collectives.sql):
        op, communicator, sequence, participants, bytes, aligned start_ns/end_ns (first arrival,
        last end), start_skew_ns (last arrival - first arrival: what the early ranks wait),
        transfer_ns (the shortest participant's kernel), busbw_gbps (nccl-tests bus bandwidth,
        GB/s), last_rank (who arrived last) and last_margin_ns."""
        return self.sql("SELECT * FROM collectives ORDER BY coll_id", arrow=arrow)

    def comms(self, by: Literal["dimension", "communicator", "collective"] = "dimension") -> dict[str, Any]:
        """The document of `nsight-analyze comms --format json`: communication per parallelism
        dimension (dp, fsdp, tp, pp, ep, unknown), communicator or collective: `total_ns`, `exposed_ns`
        (not overlapped by compute), bytes, `busbw_gbps` against the link's peak, plus notes and
        advice (docs/metrics.md). `pd.DataFrame(ws.comms()["rows"])` for a table."""
        from .comms import READS, comms

        with self.connect(needs=READS) as con:
            return comms(con, by)

    # -- findings and efficiency ------------------------------------------------------------------

    def diagnose(self, thresholds: dict[str, Any] | None = None, gpu: str | None = None) -> Diagnosis:
        """Run every rule: the findings (nsight_analyze.diagnose.Finding), ranked by recoverable
        time per step (an upper bound, ns), capture notes first, as a Diagnosis (a sequence of
        the findings, with .thresholds and .job: the job shape, missing views, rule errors).
        `thresholds` override docs/diagnose.md's ({name: value}); `gpu` states the GPU model for the HFU rule.
        Raises NoData (exit status 4 in the CLI) when the workspace has no GPU operation."""
        from .diagnose import READS, diagnose, resolve_thresholds
        from .gpus import stated_gpu
        from .no_data import require_gpu_data

        resolve_thresholds(thresholds)  # bad input is said before "no data"
        with self.connect(analyse=False, scope=True) as con:
            require_gpu_data(con, str(self.path), "diagnose")
        with self.connect(needs=READS, scope=True) as con, stated_gpu(gpu):
            return diagnose(con, thresholds)

    def diagnosis(self, thresholds: dict[str, Any] | None = None, gpu: str | None = None) -> dict[str, Any]:
        """The stable document of `nsight-analyze diagnose --format json` (docs/diagnose.md)."""
        return self.diagnosis_of(self.diagnose(thresholds, gpu))

    def diagnosis_of(self, findings: Any) -> dict[str, Any]:
        """The JSON document of findings `diagnose()` returned, with the job they are of
        (`job.scope`: which job of a workspace of several, job_scope.py)."""
        from .diagnose import findings_json

        doc = findings_json(findings)
        doc["job"]["scope"] = self.scope.as_dict() if self.scope else None
        return doc

    def findings(
        self, thresholds: dict[str, Any] | None = None, gpu: str | None = None, arrow: bool = False
    ) -> pd.DataFrame | pa.Table:
        """One row per finding in rank order: severity, id, title, `recoverable_ns_per_step` (ns
        of step time it could save per step, an upper bound), `recoverable_pct` (of the mean
        step), the ranks and steps it concerns, its summary. Evidence, signals and fixes: see
        `diagnose()` (Finding objects) or `diagnosis()` (JSON)."""
        return _frame(findings_frame(self.diagnose(thresholds, gpu)), arrow)

    def mfu_summary(self, options: MfuOptions | None = None, **fields: Any) -> dict[str, Any]:
        """The document of `nsight-analyze mfu --format json`; `options` a `MfuOptions`, or its
        fields as keywords, as for `mfu`."""
        from .gpus import validate_gpu
        from .mfu import READS, MfuOptions, hfu_mfu_summary

        opts = MfuOptions.of(options, **fields)
        validate_gpu(opts.gpu)
        with self.connect(needs=READS, scope=True) as con:
            summary = hfu_mfu_summary(con, opts)
        return {**summary, "job": self.scope.as_dict() if self.scope else None}  # which job (job_scope.py)

    def mfu(
        self,
        model_flops_per_step: float | MfuOptions | None = None,
        *,
        arrow: bool = False,
        **options: Any,
    ) -> pd.DataFrame | pa.Table:
        """MFU and HFU per step: `mfu` = model FLOPs / (step time x GPUs x dense peak), `hfu` =
        counted FLOPs (Nsight Compute) / (window x peak), both fractions (0.42 = 42 %);
        `window_ns_max` is the step's longest rank window (ns), `coverage_pct` the share of kernel
        time with counter data.

        MFU needs `model_flops_per_step` (the whole job's, forward + backward) or a model
        (params + tokens_per_step, or layers/hidden/seq_len[/vocab] with formula='megatron');
        without either, a trace recorded with shapes gives its own (`op_flops`; attrs
        ['model_flops']['source'] says "from trace shapes").
        The keywords are the fields of `nsight_analyze.mfu.MfuOptions` (the options of
        `nsight-analyze mfu`): model_flops_per_step, params, tokens_per_step, layers, hidden,
        seq_len, vocab, recompute ('none'), formula ('palm'), gpu, peak_tflops, precision
        ('bf16'), n_gpus, steps_in_window; or pass one MfuOptions.
        The whole-capture values (mfu, hfu, hfu_over_mfu, peaks, notes, gap) are in `.attrs` of
        the DataFrame (the same keys as `mfu --format json`; an Arrow table has the rows only: see
        `mfu_summary()`); unknown values are None/NaN, with the reason in attrs['notes'].
        """
        from .mfu import MfuOptions

        if isinstance(model_flops_per_step, MfuOptions):
            summary = self.mfu_summary(model_flops_per_step, **options)
        else:
            summary = self.mfu_summary(model_flops_per_step=model_flops_per_step, **options)
        return _frame(mfu_frame(summary), arrow)

    # -- outputs ----------------------------------------------------------------------------------

    def report(
        self,
        path: PathArg = "report.html",
        steps: str | None = None,
        model_flops_per_step: float | None = None,
        peak_tflops: float | None = None,
        gpu: str | None = None,
    ) -> Path:
        """Write the self-contained HTML report (as `nsight-analyze report -o PATH`); return its path.

        `steps`: 'A:B' (inclusive), 'A:', ':B' or 'N'; MFU options as for `mfu`."""
        from .gpus import validate_gpu
        from .mfu_options import MfuOptions
        from .render.report import parse_steps, write_report

        step_range = parse_steps(steps)
        options = MfuOptions(model_flops_per_step=model_flops_per_step, peak_tflops=peak_tflops, gpu=gpu)
        validate_gpu(gpu)
        with self.connect(scope=True) as con:
            note = self.scope.note() if self.scope else None
            return write_report(con, path, step_range, options, note)

    def export(
        self,
        out: PathArg,
        format: Literal["chrome-trace", "parquet"] = "chrome-trace",  # noqa: A002 - the CLI's --format
        steps: str | None = None,
        ranks: str | Sequence[int] | None = None,
        force: bool = False,
        while_writing: Callable[[str], contextlib.AbstractContextManager] | None = None,
    ) -> Any:
        """What `nsight-analyze export OUT --format F` writes; returns what was written (`.counts`).

        chrome-trace: OUT is one .json (.json.gz) file for the Perfetto UI / chrome://tracing, the
        aligned timeline (one process per rank, one track per stream, idle gaps by cause, steps,
        collectives linked across ranks); `steps` 'A:B' keeps those steps only. parquet: OUT is
        a folder of <table>.parquet files and manifest.json. `ranks`: '0,2-3' or [0, 2, 3].
        A refused OUT or bad option fails before the workspace is opened (no recompute first);
        `while_writing(text)` wraps the writing only (the command's spinner)."""
        from .errors import UserError
        from .export import parse_ranks, select_ranks
        from .render.report import parse_steps

        busy = while_writing or (lambda text: contextlib.nullcontext())
        wanted = parse_ranks(ranks) if ranks is None or isinstance(ranks, str) else _rank_numbers(ranks)
        out = Path(out)
        if format == "parquet":
            from .export.parquet import check_folder, export_parquet

            if steps is not None:
                raise UserError(
                    "--steps applies to --format chrome-trace only (parquet exports whole tables)"
                )
            check_folder(out, force)
            with self.connect() as con:
                select_ranks(con, wanted)
                with busy(f"exporting Parquet files to {out}"):
                    return export_parquet(con, out, wanted, force=force, workspace=str(self.path.resolve()))
        if format != "chrome-trace":
            raise UserError(f"unknown export format {format!r}: use chrome-trace or parquet")
        from .export.chrome_trace import READS, check_file, export_chrome_trace
        from .no_data import require_gpu_data

        step_range = parse_steps(steps)
        check_file(out, force)
        with self.connect(needs=READS) as con:
            chosen = select_ranks(con, wanted)
            require_gpu_data(con, str(self.path), "export")
            with busy(f"writing the Chrome trace {out}"):
                bounds = (step_range.first, step_range.last) if step_range is not None else None
                return export_chrome_trace(con, out, chosen, bounds, force=force)


def _rank_numbers(ranks: Sequence[int]) -> list[int]:
    """`ranks` given as numbers, sorted and unique; anything else is a ValueError naming them (not
    int()'s "invalid literal ... 'x'")."""
    from numbers import Integral

    if not all(isinstance(r, Integral) and not isinstance(r, bool) for r in ranks):
        raise ValueError(f"ranks must be rank numbers (or a string such as '0,2-3'), not {list(ranks)!r}")
    return sorted({int(r) for r in ranks})  # numpy's integers too


# ------------------------------------------------------------------------------------------------
# Module functions: na.open, na.ingest, na.compare


def open(path: PathArg = "nsight_analyze.duckdb") -> Workspace:  # noqa: A001 - na.open, like io.open
    """The workspace at `path` (made by `ingest`); raises UserError when there is none."""
    from .workspace import open_workspace

    path = Path(path)
    con = open_workspace(path, read_only=True, must_exist=True, analyse=False)  # exists, and is one
    con.close()
    return Workspace(path)


def ingest(
    inputs: PathArg | Sequence[PathArg],
    db: PathArg | None = None,
    *,
    jobs: int = 1,
    replace: bool = False,
    rules: PathArg | None = None,
    labels: dict[str, Any] | None = None,
    analyze: Iterable[str] | str | None = None,
) -> Workspace:
    """Read every trace below `inputs` (folders or files: nsys .sqlite/.nsys-rep, PyTorch-profiler
    JSON, Nsight Compute CSV) into the workspace `db` (default: nsight_analyze.duckdb beside the
    first input) and compute its analysis; return it. The ingest report (per-file outcomes) is
    `ws.ingest_report`. Raises UserError when a file failed or nothing was loaded. `labels`:
    run labels of these files' runs ({"batch": 32}, as `ingest --label batch=32`; docs/runs.md).
    `analyze`: what is computed now (None: the first answers; "all"; table names); everything
    else is computed when first read (as `ingest --analyze`).
    """
    from .errors import UserError
    from .ingest import ingest as _ingest

    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:  # 0 meant "every core"
        raise ValueError(f"jobs must be a whole number >= 1 (1: this process), not {jobs!r}")
    paths = [Path(inputs)] if isinstance(inputs, (str, PathLike)) else [Path(p) for p in inputs]
    if not paths:
        raise UserError("ingest: no input given")
    if db is None:
        first = paths[0]
        db = (first if first.is_dir() else first.parent) / "nsight_analyze.duckdb"
    from .run_labels import parse_cli_labels

    given = parse_cli_labels([f"{k}={v}" for k, v in (labels or {}).items()])  # as `--label k=v`
    report = _ingest(
        paths,
        Path(db),
        jobs=jobs,
        replace=replace,
        rules=Path(rules) if rules else None,
        labels=given,
        analyze=analyze,
    )
    failed = report.by_status("failed")
    if failed:
        raise UserError(f"{failed[0].path}: {failed[0].message}")
    if not Path(db).exists():
        raise UserError(f"nothing ingested from {', '.join(map(str, paths))}")
    ws = Workspace(db)
    ws.ingest_report = report
    return ws


def compare(
    before: PathArg | Workspace,
    after: PathArg | Workspace,
    *,
    settings: dict[str, Any] | None = None,
    findings: bool = True,
    model_flops_per_step: float | None = None,
    fail_on_regression_pct: float | None = None,
    before_job: int | None = None,
    after_job: int | None = None,
    ranks: dict[int, int] | str | None = None,
) -> dict[str, Any]:
    """Compare two runs (workspaces, or trace folders/files ingested into temporary ones): the
    stable document of `nsight-analyze compare --format json` (docs/compare.md): verdict
    (improvement / regression / neutral, on the slowest rank's median step time with a bootstrap
    interval), step times, partition, kernels and collectives that changed, matched findings.
    An input of several jobs is compared as one: `before_job`/`after_job` (or the Workspace's
    `job`), else the one with the most ranks. `ranks`: BEFORE's rank -> AFTER's rank to compare
    ({3: 1}, or "3=1" as `--ranks`), else ranks are matched by number."""
    from .compare import compare as _compare

    return _compare(
        Path(before),
        Path(after),
        settings=settings,
        findings=findings,
        model_flops_per_step=model_flops_per_step,
        fail_on_regression_pct=fail_on_regression_pct,
        before_job=before_job if before_job is not None else getattr(before, "job", None),
        after_job=after_job if after_job is not None else getattr(after, "job", None),
        ranks=ranks,
    )


__all__ = ["Workspace", "compare", "ingest", "open", "rank_report", "run_sql"]
