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
42 % of the dense peak). Definitions: docs/metrics.md; columns of the views: queries/*/*.sql.

A `Workspace` holds no connection between calls (each call opens the DuckDB file read-only and
closes it), so another process may ingest into the same file between two calls; use
`ws.connect()` for several queries on one connection. Stale stored results (the files,
settings or queries changed) are recomputed on the first call, as the CLI does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # imported lazily: `import nsight_analyze` stays light
    import duckdb
    import pandas as pd
    import pyarrow as pa

    from ..ingest.report import IngestReport

from .findings import FindingsMethods
from .frames import rank_report, rank_report_json, run_sql
from .outputs import OutputMethods
from .tables import PathArg, frame

By = Literal["rank", "step", "rank-step"]


# ------------------------------------------------------------------------------------------------
# The workspace object


class Workspace(FindingsMethods, OutputMethods):
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
        from ..store.job_scope import scope as scope_job
        from ..store.workspace import open_workspace

        con = open_workspace(self.path, read_only=read_only, must_exist=True, analyse=analyse, needs=needs)
        try:
            if scope or (scope is None and self.job is not None):
                self.scope = scope_job(con, self.job)
            yield con
        finally:
            con.close()

    def sql(self, query: str, arrow: bool = False, write: bool = False) -> pd.DataFrame | pa.Table | None:
        """Run one DuckDB SQL statement on the workspace (read-only unless `write`).

        The tables and views are documented in docs/metrics.md and queries/*/*.sql (integer ns
        times). Returns None for a statement without a result (CREATE, INSERT, ...)."""
        from ..store.query_layer import names_in

        needs = names_in(query) if isinstance(query, str) else None  # run_sql says what is wrong
        with self.connect(read_only=not write, needs=needs) as con:
            return run_sql(con, query, arrow=arrow)

    # -- what is in it ----------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """Files, versions, jobs, ranks, event counts, time span and warnings (`info --format json`).

        `span` rows: per rank, first_ns/last_ns, the earliest start and latest end of a GPU
        operation on the rank's own (unaligned) clock."""
        from ..store.workspace_info import workspace_info

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
        from ..gpus import rank_peaks
        from ..gpus.table import DEFAULT_PRECISION, validate_gpu

        validate_gpu(gpu)
        with self.connect(needs=None) as con:
            df = rank_peaks(con, peak_tflops=peak_tflops, precision=precision or DEFAULT_PRECISION, gpu=gpu)
        return frame(df, arrow)

    def ncu_peaks(self, precision: str | None = None, arrow: bool = False) -> pd.DataFrame | pa.Table:
        """Per hardware-counter file (Nsight Compute, or a Kineto trace with CUPTI range-profiler
        counters): the dense peak (TFLOP/s) and memory bandwidth (GB/s) its roofline ridge points
        use, and where they came from."""
        from ..gpus import ncu_peaks_sql
        from ..gpus.table import DEFAULT_PRECISION

        sql = ncu_peaks_sql(precision or DEFAULT_PRECISION)
        with self.connect(needs=None) as con:
            df = con.execute(sql).df()
        return frame(df, arrow)

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
        from ..classify import COVERAGE_VIEWS, reclassify_all

        if by not in COVERAGE_VIEWS:
            raise ValueError(f"by must be one of {', '.join(COVERAGE_VIEWS)}, not {by!r}")
        with self.connect(read_only=False) as con:
            reclassify_all(con, Path(rules) if rules is not None else None)
            return frame(con.execute(f"SELECT * FROM {COVERAGE_VIEWS[by]}").df(), arrow)

    # -- where the time goes ----------------------------------------------------------------------

    def summary(self, by: By = "rank") -> dict[str, Any]:
        """Everything `nsight-analyze summary` shows (`--format json`): {by, partition,
        step_source, top_kernels, no_timeline, warnings, notes, job}; see `partition` for the rows."""
        from ..summary import summary

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
        from ..summary import partition

        with self.connect(needs=None, scope=True) as con:
            return frame(partition(con, by), arrow)

    def top_kernels(self, limit: int = 10, arrow: bool = False) -> pd.DataFrame | pa.Table:
        """The kernels with the most GPU time summed over all ranks: instances, total_ns (ns),
        pct (of all kernel time)."""
        from ..summary import top_kernels

        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError(f"limit must be a whole number >= 0, not {limit!r}")
        with self.connect(needs=None, scope=True) as con:
            return frame(top_kernels(con, limit), arrow)

    # -- ranks, collectives, stragglers -----------------------------------------------------------

    def rank_report(self) -> dict[str, Any]:
        """The document of `nsight-analyze ranks --format json`: jobs, ranks, alignment, the
        straggler verdict per job, and the NCCL kernels no wait could be computed for."""
        from ..whatif import READS  # its "why each rank is slow"

        with self.connect(needs=READS) as con:
            return rank_report_json(rank_report(con))

    def whatif(self) -> dict[str, Any]:
        """The document of `nsight-analyze whatif --format json` (docs/whatif.md): per step and for
        the whole job, the step time if each cause went away (the measured dependencies replayed)."""
        from ..whatif import READS, document

        with self.connect(needs=READS, scope=True) as con:
            return document(con)

    def ranks(self, arrow: bool = False) -> pd.DataFrame | pa.Table:
        """One row per rank: job, host, device, GPU, `clock_offset_ns` (added to the rank's
        timestamps to put it on the job's clock) and its alignment residuals (p50/p95 ns),
        `compute_ns` (whole capture), `wait_suffered_ns` (time its NCCL kernels waited for later
        ranks), `wait_caused_ns` (GPU time the other ranks waited for it), `times_slowest`
        (imbalanced steps it was slowest in), `times_last` (collectives it arrived last at),
        `cost_ns` (the job's delay it caused, for the straggler) and `straggler`."""
        return frame(self.rank_report()["ranks"], arrow)

    def collectives(self, arrow: bool = False) -> pd.DataFrame | pa.Table:
        """One row per NCCL operation instance matched across ranks (queries/comms/collectives.sql):
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
        from ..comms import READS, comms

        with self.connect(needs=READS) as con:
            return comms(con, by)


# ------------------------------------------------------------------------------------------------
# Module functions: na.open, na.ingest, na.compare


def open(path: PathArg = "nsight_analyze.duckdb") -> Workspace:  # noqa: A001 - na.open, like io.open
    """The workspace at `path` (made by `ingest`); raises UserError when there is none."""
    from ..store.workspace import open_workspace

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
    from ..errors import UserError
    from ..ingest.run import ingest as _ingest

    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:  # 0 meant "every core"
        raise ValueError(f"jobs must be a whole number >= 1 (1: this process), not {jobs!r}")
    paths = [Path(inputs)] if isinstance(inputs, (str, PathLike)) else [Path(p) for p in inputs]
    if not paths:
        raise UserError("ingest: no input given")
    if db is None:
        first = paths[0]
        db = (first if first.is_dir() else first.parent) / "nsight_analyze.duckdb"
    from ..run_labels import parse_cli_labels

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
    from ..compare import compare as _compare

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
