"""What a workspace holds when a command has nothing to work on, said in one line (NoData, exit 4).

Why one module: a workspace of Nsight Compute reports, CUPTI range-profiler counters, DCGM
samples or a recipe output without its reports (nsys-jax archives) is not empty, yet holds no
timeline; "run ingest first" would send the user back to a step they took. Every command that
needs GPU operations (diagnose, export, compare) or ranks with a timeline (ranks, comms, whatif,
compare) says what the workspace holds instead and which commands read it. Imports no click:
library modules (api.frames, comms, whatif, compare) raise these too.
"""

from __future__ import annotations

import duckdb

from .errors import NoData
from .store.query_layer import statements

SQL = statements("answers/no_data")

# Counters a workspace can hold without a timeline: (label, count query, whether `diagnose` reads
# them: has_gpu_operations counts Nsight Compute launches as GPU operations).
_COUNTERS = (
    ("Nsight Compute kernel launches", SQL["ncu_kernel_launches"], True),
    ("CUPTI range-profiler kernels", SQL["profiler_range_kernels"], False),
    ("DCGM samples", SQL["dcgm_samples"], False),
)
_RECIPE_ROWS = SQL["recipe_rows"]


def has_gpu_operations(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether a workspace holds any GPU operation: a timeline kernel or memory operation, or an
    Nsight Compute kernel (a workspace of ncu reports has no timeline but can still be diagnosed)."""
    known = {r[0] for r in con.execute(SQL["table_names"]).fetchall()}
    tables = [t for t in ("kernels", "memops", "ncu_kernels") if t in known]
    return any(con.execute(SQL.sql("has_rows", table=t)).fetchone()[0] for t in tables)


def require_gpu_data(con: duckdb.DuckDBPyConnection, db: str, what: str) -> None:
    """Raise NoData (exit NO_DATA_EXIT) when the workspace has no GPU operation to `what`."""
    if not has_gpu_operations(con):
        why = held_instead(con) or ("nothing was ingested, or no file had any; see `nsight-analyze info`")
        raise NoData(f"no data to {what} in {db}: the workspace has no GPU operations ({why})")


def require_ranks(con: duckdb.DuckDBPyConnection, what: str) -> None:
    """Raise NoData when the workspace has no rank, i.e. no timeline to `what` (a rank is a
    process with GPU work in an nsys or PyTorch-profiler trace)."""
    if con.execute(SQL.sql("has_rows", table="ranks")).fetchone()[0]:
        return
    why = held_instead(con) or "nothing was ingested: run `nsight-analyze ingest DIR` first"
    raise NoData(f"no data to {what} in {_path(con)}: the workspace has no ranks ({why})")


def held_instead(con: duckdb.DuckDBPyConnection) -> str:
    """'' when the workspace holds no counters or recipe rows, else what it holds and which
    commands read it (require_gpu_data finds no Nsight Compute launch here: they are GPU operations)."""
    held, diagnosable = [], False
    for label, sql, diagnosed in _COUNTERS:
        n = _count(con, sql)
        if n:
            held.append(f"{n:,} {label}")
            diagnosable = diagnosable or diagnosed
    said = []
    if held:
        readers = "`diagnose`, `gpus`, `mfu` and `sql`" if diagnosable else "`gpus`, `mfu` and `sql`"
        said.append(
            f"counters without a timeline ({', '.join(held)}): {readers} read them; "
            "a timeline needs nsys or PyTorch-profiler traces of the same run"
        )
    recipe = _count(con, _RECIPE_ROWS)
    if recipe:
        said.append(
            f"{recipe:,} rows of an nvtx_gpu_proj_trace recipe output without the reports it was "
            "computed from: `sql` reads them (recipe_nvtx_gpu_proj); ingest the reports for a timeline"
        )
    return "it holds " + "; and ".join(said) if said else ""


def _count(con: duckdb.DuckDBPyConnection, sql: str) -> int:
    try:
        return con.execute(sql).fetchone()[0]
    except duckdb.Error:  # a workspace made before the table existed
        return 0


def _path(con: duckdb.DuckDBPyConnection) -> str:
    """The workspace file of a connection, for the message (its in-memory name otherwise)."""
    row = con.execute(SQL["workspace_file"]).fetchone()
    return str(row[0]) if row else "the workspace"
