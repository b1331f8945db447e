"""MFU and HFU rows, one per rank and window: the windows, the peaks and the SQL that joins them.

Why a module of its own: these rows are what every MFU number is a sum over (mfu/__init__.py's summary
document, diagnose's efficiency rule, compare, the report); the summary aggregates them in SQL
(`rows_table`), and `hfu_table` / `hfu_mfu_table` return them as DataFrames for callers and tests.

Windows come from the `steps` view (the time partition's steps) when it has rows, else the
whole capture per rank, else windows passed in. Peaks come from nsight_analyze.gpus; a rank
whose peak is unknown (GPU not recorded and not stated with --gpu) has MFU/HFU unknown (NULL),
never guessed. The computations are SQL; Python only assembles parameters.
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
from .flops import ModelFlops

if TYPE_CHECKING:
    import pandas as pd

# rank_peak_rows' rows (gpus.PEAK_COLUMNS) with the clock the tensor-active estimate scales by
Peaks = list[dict[str, Any]]

_CAPTURE_WINDOWS = """(SELECT rank, NULL::BIGINT AS step, min(start_ns) AS start_ns, max(end_ns) AS end_ns
    FROM (SELECT rank, start_ns, end_ns FROM kernels UNION ALL SELECT rank, start_ns, end_ns FROM memops)
    GROUP BY rank)"""
# the windows of the steady steps (queries/steps/job_steps.sql); the whole-capture window (step NULL) too
_STEP_WINDOWS = (
    "(SELECT s.rank, s.step, s.start_ns, s.end_ns FROM steps AS s JOIN ranks AS r USING (rank) "
    "LEFT JOIN job_steps AS j ON j.job = r.job AND j.step = s.step WHERE coalesce(j.steady, true))"
)


def _window_sql(con: duckdb.DuckDBPyConnection, given: pd.DataFrame | None) -> tuple[str, str]:
    """(a relation of rank, step, start_ns, end_ns windows, where they came from): `given`
    (registered as _hfu_given_windows by the caller), else `steps`, else the whole capture."""
    if given is not None:
        return "_hfu_given_windows", "given"
    if has_relation(con, "steps"):
        n, sources, once, steady = con.execute(
            "SELECT count(*), list(DISTINCT source ORDER BY source) FILTER (WHERE source IS NOT NULL), "
            "count(DISTINCT step) FILTER (WHERE one_time), count(*) FILTER (WHERE NOT one_time) FROM steps"
        ).fetchone()
        if n:
            left_out = f"; {once} step(s) of one-time work left out" if once and steady else ""
            return _STEP_WINDOWS, "steps (" + ", ".join(sources or []) + ")" + left_out
    return _CAPTURE_WINDOWS, "capture"


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
    return con.execute(f"SELECT * FROM {relation} ORDER BY rank, step").df(), source


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


# per window: the kernels, their time and what the counters counted (FLOPs joined per kernel)
_HFU_AGG_SCAN = """k AS (
    SELECT rank, start_ns, duration_ns, flops, tensor_flops, coalesce(category = 'comms', false) AS is_comms
    FROM {kernels}
),
agg AS (
    SELECT w.rank, w.step, w.start_ns, w.end_ns,
        count(k.start_ns) FILTER (WHERE NOT k.is_comms) AS kernels,
        count(k.flops) FILTER (WHERE NOT k.is_comms) AS kernels_counted,
        coalesce(sum(k.duration_ns) FILTER (WHERE NOT k.is_comms), 0) AS kernel_ns,
        coalesce(sum(k.duration_ns) FILTER (WHERE NOT k.is_comms AND k.flops IS NOT NULL), 0) AS counted_ns,
        sum(k.flops) AS counted_flops,
        sum(k.tensor_flops) AS tensor_flops
    FROM w LEFT JOIN k ON k.rank = w.rank AND k.start_ns >= w.start_ns AND k.start_ns < w.end_ns
    GROUP BY ALL
)"""

# no counter data, `steps` windows: the stored kernel totals (hfu_window_kernels), nothing counted
_HFU_AGG_STORED = """agg AS (SELECT w.rank, w.step, w.start_ns, w.end_ns, coalesce(h.kernels, 0) AS kernels,
    0::BIGINT AS kernels_counted, coalesce(h.kernel_ns, 0::HUGEINT) AS kernel_ns, 0::HUGEINT AS counted_ns,
    NULL::DOUBLE AS counted_flops, NULL::DOUBLE AS tensor_flops FROM w LEFT JOIN hfu_window_kernels h
    ON h.rank = w.rank AND h.step IS NOT DISTINCT FROM w.step AND h.start_ns = w.start_ns)"""

_WINDOWS_NOT_STORED = """SELECT count(*) FROM {windows} w ANTI JOIN hfu_window_kernels h ON h.rank = w.rank
    AND h.step IS NOT DISTINCT FROM w.step AND h.start_ns = w.start_ns AND h.end_ns = w.end_ns"""

_HFU_SQL = """
WITH w AS (SELECT rank, step, start_ns, end_ns FROM {windows}),
{agg},
gm AS (
    SELECT w.rank, w.step,
        avg(g.value) FILTER (WHERE g.metric_name ILIKE 'Tensor Active%') AS tensor_active_pct,
        avg(g.value) FILTER (WHERE g.metric_name ILIKE 'GPC Clock Frequency%') AS gpc_mhz,
        -- DCGM samples of the rank's GPU (sources/dcgm.match_ranks): ratio 0-1 -> %
        100.0 * avg(g.value) FILTER (WHERE g.metric_name = 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE')
            AS dcgm_tensor_active_pct,
        count(*) FILTER (WHERE g.metric_name = 'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE') AS dcgm_samples,
        avg(g.value) FILTER (WHERE g.metric_name = 'DCGM_FI_DEV_SM_CLOCK') AS dcgm_sm_mhz
    FROM w JOIN gpu_metrics g
        ON g.rank = w.rank AND g.timestamp_ns >= w.start_ns AND g.timestamp_ns < w.end_ns
    GROUP BY ALL
)
SELECT a.rank, a.step, a.start_ns, a.end_ns, (a.end_ns - a.start_ns) AS window_ns,
    a.kernels, a.kernels_counted, a.kernel_ns, a.counted_ns,
    CASE WHEN a.kernel_ns > 0 THEN 100.0 * a.counted_ns / a.kernel_ns END AS coverage_pct,
    a.counted_flops, a.tensor_flops,
    p.peak_flops, p.source AS peak_source,
    a.counted_flops / nullif((a.end_ns - a.start_ns) * 1e-9 * p.peak_flops, 0) AS hfu,
    gm.tensor_active_pct, gm.gpc_mhz,
    gm.tensor_active_pct / 100.0 * coalesce(gm.gpc_mhz / nullif(p.clock_ref_mhz, 0), 1.0)
        AS hfu_tensor_active,
    gm.dcgm_tensor_active_pct, coalesce(gm.dcgm_samples, 0) AS dcgm_samples,
    -- an estimate: tensor-pipe activity x dense peak (precision-blind, clock-scaled)
    gm.dcgm_tensor_active_pct / 100.0 * coalesce(gm.dcgm_sm_mhz / nullif(p.clock_ref_mhz, 0), 1.0)
        AS hfu_dcgm_estimate,
    gm.dcgm_tensor_active_pct / 100.0 * coalesce(gm.dcgm_sm_mhz / nullif(p.clock_ref_mhz, 0), 1.0)
        * (a.end_ns - a.start_ns) * 1e-9 * p.peak_flops AS dcgm_estimated_flops,
    gm.dcgm_tensor_active_pct / nullif(gm.tensor_active_pct, 0) AS dcgm_over_nsys_tensor_active
FROM agg a
LEFT JOIN _hfu_peaks p ON p.rank = a.rank
LEFT JOIN gm ON gm.rank = a.rank AND gm.step IS NOT DISTINCT FROM a.step
"""

# MFU beside HFU: a step window gets the model FLOPs per step / n_gpus, a whole-capture window that
# times the steps it holds when stated ($steps), else none. From the trace's shapes ({trace}):
# each window gets the FLOPs of the rank's ops (op_flops) whose first kernel starts in it, 0 when
# none does, and NULL on a rank without any counted op (unknown, not zero)
_MFU_SQL = """
WITH h AS ({hfu}),
tf AS (
    SELECT h.rank, h.step, h.start_ns, sum(o.flops) AS flops
    FROM h JOIN {op_flops} o ON o.rank = h.rank AND o.first_kernel_ns >= h.start_ns
        AND o.first_kernel_ns < h.end_ns
    WHERE {trace} AND o.flops IS NOT NULL
    GROUP BY ALL
),
shaped AS (SELECT DISTINCT rank FROM {op_flops} WHERE {trace} AND flops IS NOT NULL AND kernels > 0),
m AS (
    SELECT h.*, {world}::BIGINT AS n_gpus,
        CASE WHEN {trace} THEN CASE WHEN h.rank IN (SELECT rank FROM shaped) THEN coalesce(tf.flops, 0) END
             WHEN h.step IS NOT NULL THEN {per_gpu} WHEN {steps} > 0 THEN {per_gpu} * {steps} END::DOUBLE
            AS model_flops
    FROM h LEFT JOIN tf
        ON tf.rank = h.rank AND tf.step IS NOT DISTINCT FROM h.step AND tf.start_ns = h.start_ns
)
SELECT m.*, m.model_flops / nullif(m.window_ns * 1e-9 * m.peak_flops, 0) AS mfu
FROM m
"""
# the op_flops stand-in when the workspace has no such table (the SQL above then reads no row of it)
_NO_OP_FLOPS = (
    "(SELECT NULL::INTEGER AS rank, NULL::BIGINT AS first_kernel_ns, NULL::DOUBLE AS flops, 0 AS kernels)"
)


def trace_flops(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """(ops whose FLOPs the trace's shapes give and whose kernels ran, ops with shapes whose FLOPs
    they do not give but whose kernels ran): what MFU can read from the trace itself (op_flops)."""
    if not has_relation(con, "op_flops"):
        return (0, 0)
    row = con.execute(
        "SELECT count(*) FILTER (WHERE flops IS NOT NULL), count(*) FILTER (WHERE flops IS NULL) "
        "FROM op_flops WHERE kernels > 0"
    ).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def counter_kernels(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """(Nsight Compute launches, CUPTI range-profiler kernels) in the workspace."""
    row = con.execute(
        "SELECT (SELECT count(*) FROM ncu_kernels), (SELECT count(*) FROM kineto_profiler_ranges)"
    ).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def _kernel_source(counted: bool) -> str:
    """hfu_timeline_flops when there is counter data to match; else the bare kernels (fast path)."""
    if counted:
        return "hfu_timeline_flops"
    return (
        "(SELECT rank, start_ns, duration_ns, category, NULL::DOUBLE AS flops, NULL::DOUBLE AS tensor_flops"
        " FROM kernels)"
    )


@contextmanager
def _registered(
    con: duckdb.DuckDBPyConnection, peaks: Peaks, given: pd.DataFrame | None
) -> Iterator[tuple[str, str]]:
    """The peaks (and given windows) visible to the SQL; yields (the HFU query, window source).

    The peaks are a TEMP table of literals, not a registered DataFrame: DuckDB imports pandas to
    register a Python object (and `mfu` imports none); given windows are a caller's DataFrame."""
    con.execute(
        "CREATE OR REPLACE TEMP TABLE _hfu_peaks "
        "(rank BIGINT, peak_flops DOUBLE, source VARCHAR, clock_ref_mhz DOUBLE)"
    )
    if peaks:
        keep = [(p["rank"], p["peak_flops"], p["source"], p["clock_ref_mhz"]) for p in peaks]
        con.execute(f"INSERT INTO _hfu_peaks VALUES {sql_rows(keep)}")
    if given is not None:
        con.register("_hfu_given_windows", _given(given))
    try:
        relation, source = _window_sql(con, given)
        counted = any(counter_kernels(con))
        # the stored totals only when nothing was counted and every window is a stored one
        stored = not counted and has_relation(con, "hfu_window_kernels")
        stored = stored and not con.execute(_WINDOWS_NOT_STORED.format(windows=relation)).fetchone()[0]
        agg = _HFU_AGG_STORED if stored else _HFU_AGG_SCAN.format(kernels=_kernel_source(counted))
        yield _HFU_SQL.format(windows=relation, agg=agg), source
    finally:
        con.execute("DROP TABLE IF EXISTS _hfu_peaks")
        if given is not None:
            con.unregister("_hfu_given_windows")


_ORDER = " ORDER BY rank, step NULLS FIRST"
ROWS_TABLE = "_mfu_rows"


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
        return con.execute(f"SELECT * FROM ({sql}){_ORDER}").df()


def _mfu_sql(
    con: duckdb.DuckDBPyConnection,
    hfu: str,
    model: ModelFlops | None,
    n_gpus: int | None,
    steps_in_window: int | None,
    trace: bool = False,
) -> str:
    """_MFU_SQL over the HFU query `hfu`, its parameters as literals (binding one imports pandas);
    `trace`: the model FLOPs are the trace's own (op_flops), not `model`'s."""
    world = n_gpus or n_gpus_of(con) or 1
    per_gpu = None if model is None else model.model_flops_per_step / world
    return _MFU_SQL.format(
        hfu=hfu,
        trace="true" if trace else "false",
        op_flops="op_flops" if has_relation(con, "op_flops") else _NO_OP_FLOPS,
        world=sql_value(world),
        per_gpu=f"{sql_value(per_gpu)}::DOUBLE",
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
            f"CREATE OR REPLACE TEMP TABLE {ROWS_TABLE} AS "
            + _mfu_sql(con, sql, model, n_gpus, steps_in_window, trace)
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
        df = con.execute(_mfu_sql(con, sql, model, n_gpus, steps_in_window) + _ORDER).df()
    df["hfu_over_mfu"] = df["hfu"] / df["mfu"]
    return df
