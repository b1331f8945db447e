"""MFU and HFU rows, one per rank and window: the windows, the peaks and the SQL that joins them.

Why a module of its own: these rows are what every MFU number is a sum over (mfu/__init__.py's summary
document, diagnose's efficiency rule, compare, the report); the summary aggregates them in SQL
(`rows_table`), and `hfu_table` / `hfu_mfu_table` return them as DataFrames for callers and tests.

Windows come from the `steps` view (the time partition's steps) when it has rows, else the
whole capture per rank, else windows passed in. Peaks come from nsight_analyze.gpus; a rank
whose peak is unknown (GPU not recorded and not stated with --gpu) has MFU/HFU unknown (NULL),
never guessed. The computations are SQL (queries/mfu/rows.sql); Python only assembles parameters.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import duckdb

from .. import gpus
from ..gpus.table import DEFAULT_PRECISION
from ..plain import jsonable
from ..store.duck import has_relation, sql_rows, sql_value
from ..store.query_layer import statements
from .flops import ModelFlops

if TYPE_CHECKING:
    import pandas as pd

# rank_peak_rows' rows (gpus.PEAK_COLUMNS) with the clock the tensor-active estimate scales by
Peaks = list[dict[str, Any]]

SQL = statements("mfu/rows")


def _window_sql(con: duckdb.DuckDBPyConnection, given: pd.DataFrame | None) -> tuple[str, str]:
    """(a relation of rank, step, start_ns, end_ns windows, where they came from): `given`
    (registered as _hfu_given_windows by the caller), else `steps`, else the whole capture."""
    if given is not None:
        return "_hfu_given_windows", "given"
    if has_relation(con, "steps"):
        n, sources, once, steady = con.execute(SQL["step_sources"]).fetchone()
        if n:
            left_out = f"; {once} step(s) of one-time work left out" if once and steady else ""
            return SQL["step_windows"], "steps (" + ", ".join(sources or []) + ")" + left_out
    return SQL["capture_windows"], "capture"


def _given(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    if "step" not in df.columns:
        df["step"] = None
    return df[["rank", "step", "start_ns", "end_ns"]]


def windows(con: duckdb.DuckDBPyConnection, given: pd.DataFrame | None = None) -> tuple[pd.DataFrame, str]:
    """(rank, step, start_ns, end_ns) windows and where they came from.

    `given` (same columns) wins; then the `steps` view; then the whole capture of each rank.
    """
    if given is not None:
        return _given(given), "given"
    relation, source = _window_sql(con, None)
    return con.execute(SQL.sql("window_rows", windows=relation)).df(), source


def n_gpus_of(con: duckdb.DuckDBPyConnection) -> int:
    """World size recorded in the traces, else the number of ranks in the workspace."""
    row = con.execute("SELECT max(world_size), count(*) FROM ranks").fetchone()
    if row is None:
        return 0
    return int(row[0] or row[1] or 0)


_SHARED_PEAKS: ContextVar[dict[tuple, Peaks] | None] = ContextVar("mfu_shared_peaks", default=None)


@contextmanager
def shared_peaks() -> Iterator[None]:
    """Inside the block, each connection's rank peaks are resolved once per (peak_tflops,
    precision, GPU stated): the report computes MFU twice over unchanging data (its own section
    and diagnose's efficiency rule), and resolving reads every kernel name."""
    token = _SHARED_PEAKS.set({})
    try:
        yield
    finally:
        _SHARED_PEAKS.reset(token)


def _rank_peaks(
    con: duckdb.DuckDBPyConnection, peak_tflops: float | None, precision: str, gpu: str | None
) -> Peaks:
    shared = _SHARED_PEAKS.get()
    if shared is None:
        return gpus.rank_peak_rows(con, peak_tflops=peak_tflops, precision=precision, gpu=gpu)
    key = (id(con), peak_tflops, precision, gpu if gpu is not None else gpus._STATED_GPU.get())
    if key not in shared:
        shared[key] = gpus.rank_peak_rows(con, peak_tflops=peak_tflops, precision=precision, gpu=gpu)
    return shared[key]


def peaks_of(
    con: duckdb.DuckDBPyConnection,
    peaks: Peaks | pd.DataFrame | None,
    peak_tflops: float | None,
    precision: str,
    gpu: str | None = None,
) -> Peaks:
    """Per-rank peaks (given: rows or a DataFrame of gpus.PEAK_COLUMNS; else resolved) with the
    clock the tensor-active estimate scales by. Plain rows: `mfu` imports no pandas."""
    if peaks is None:
        rows = _rank_peaks(con, peak_tflops, precision, gpu)
    elif isinstance(peaks, list):
        rows = peaks
    else:  # NaN -> None, numpy -> Python
        rows = [{k: jsonable(v) for k, v in r.items()} for r in peaks.astype(object).to_dict("records")]
    return [
        {**r, "clock_ref_mhz": r["tensor_mhz"] if r["tensor_mhz"] is not None else r["boost_mhz"]}
        for r in rows
    ]


def trace_flops(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """(ops whose FLOPs the trace's shapes give and whose kernels ran, ops with shapes whose FLOPs
    they do not give but whose kernels ran): what MFU can read from the trace itself (op_flops)."""
    if not has_relation(con, "op_flops"):
        return (0, 0)
    row = con.execute(SQL["op_flops_counted"]).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def counter_kernels(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """(Nsight Compute launches, CUPTI range-profiler kernels) in the workspace."""
    row = con.execute(SQL["counter_kernel_counts"]).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def _kernel_source(counted: bool) -> str:
    """hfu_timeline_flops when there is counter data to match; else the bare kernels (fast path)."""
    return "hfu_timeline_flops" if counted else SQL["kernels_uncounted"]


@contextmanager
def _registered(
    con: duckdb.DuckDBPyConnection, peaks: Peaks, given: pd.DataFrame | None
) -> Iterator[tuple[str, str]]:
    """The peaks (and given windows) visible to the SQL; yields (the HFU query, window source).

    The peaks are a TEMP table of literals, not a registered DataFrame: DuckDB imports pandas to
    register a Python object (and `mfu` imports none); given windows are a caller's DataFrame."""
    con.execute(SQL["create_peaks"])
    if peaks:
        keep = [(p["rank"], p["peak_flops"], p["source"], p["clock_ref_mhz"]) for p in peaks]
        con.execute(SQL.sql("insert_peaks", rows=sql_rows(keep)))
    if given is not None:
        con.register("_hfu_given_windows", _given(given))
    try:
        relation, source = _window_sql(con, given)
        counted = any(counter_kernels(con))
        # the stored totals only when nothing was counted and every window is a stored one
        stored = not counted and has_relation(con, "hfu_window_kernels")
        stored = stored and not con.execute(SQL.sql("windows_not_stored", windows=relation)).fetchone()[0]
        agg = SQL["agg_stored"] if stored else SQL.sql("agg_scan", kernels=_kernel_source(counted))
        yield SQL.sql("hfu_rows", windows=relation, agg=agg), source
    finally:
        con.execute("DROP TABLE IF EXISTS _hfu_peaks")
        if given is not None:
            con.unregister("_hfu_given_windows")


ROWS_TABLE = "_mfu_rows"  # the TEMP table create_rows_table makes, which mfu/mfu.sql reads


def hfu_table(
    con: duckdb.DuckDBPyConnection,
    peaks: Peaks | pd.DataFrame | None = None,
    window_df: pd.DataFrame | None = None,
    peak_tflops: float | None = None,
    precision: str = DEFAULT_PRECISION,
    gpu: str | None = None,
) -> pd.DataFrame:
    """Counter-based HFU per rank and window (a kernel belongs to the window its start is in)."""
    peaks = peaks_of(con, peaks, peak_tflops, precision, gpu)
    with _registered(con, peaks, window_df) as (sql, _source):
        return con.execute(SQL.sql("hfu_rows_ordered", hfu=sql)).df()


def _mfu_sql(
    con: duckdb.DuckDBPyConnection,
    hfu: str,
    model: ModelFlops | None,
    n_gpus: int | None,
    steps_in_window: int | None,
    trace: bool = False,
) -> str:
    """mfu_rows over the HFU query `hfu`, its parameters as literals (binding one imports pandas);
    `trace`: the model FLOPs are the trace's own (op_flops), not `model`'s."""
    world = n_gpus or n_gpus_of(con) or 1
    per_gpu = None if model is None else model.model_flops_per_step / world
    return SQL.sql(
        "mfu_rows",
        hfu=hfu,
        trace="true" if trace else "false",
        op_flops="op_flops" if has_relation(con, "op_flops") else SQL["no_op_flops"],
        world=sql_value(world),
        per_gpu=sql_value(per_gpu),
        steps=sql_value(steps_in_window or 0),
    )


@contextmanager
def rows_table(
    con: duckdb.DuckDBPyConnection,
    model: ModelFlops | None,
    peaks: Peaks,
    window_df: pd.DataFrame | None = None,
    n_gpus: int | None = None,
    steps_in_window: int | None = None,
    trace: bool = False,
) -> Iterator[str]:
    """The hfu_mfu_table rows as the TEMP table ROWS_TABLE (NULL, not NaN, for every unknown
    value) while the block runs: what the summary aggregates in SQL; yields where the windows
    came from. `trace`: each window's model FLOPs are its ops' FLOPs from the trace's shapes."""
    with _registered(con, peaks, window_df) as (sql, source):
        con.execute(
            SQL.sql("create_rows_table", mfu=_mfu_sql(con, sql, model, n_gpus, steps_in_window, trace))
        )
    try:
        yield source
    finally:
        con.execute(f"DROP TABLE IF EXISTS {ROWS_TABLE}")


def hfu_mfu_table(
    con: duckdb.DuckDBPyConnection,
    model: ModelFlops | None,
    peaks: Peaks | pd.DataFrame | None = None,
    window_df: pd.DataFrame | None = None,
    peak_tflops: float | None = None,
    precision: str = DEFAULT_PRECISION,
    n_gpus: int | None = None,
    steps_in_window: int | None = None,
    gpu: str | None = None,
) -> pd.DataFrame:
    """Per rank and window: MFU and HFU side by side (NaN where the rank's peak is unknown).

    A step window of rank r gets model_flops_per_step / n_gpus (data/tensor/pipeline
    parallel ranks share a step's work evenly on average); a whole-capture window gets
    that times `steps_in_window` when given, else no MFU.
    """
    peaks = peaks_of(con, peaks, peak_tflops, precision, gpu)
    with _registered(con, peaks, window_df) as (sql, _source):
        df = con.execute(
            SQL.sql("mfu_rows_ordered", mfu=_mfu_sql(con, sql, model, n_gpus, steps_in_window))
        ).df()
    df["hfu_over_mfu"] = df["hfu"] / df["mfu"]
    return df
