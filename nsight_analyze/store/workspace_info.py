"""What a workspace holds, as one document: its files, jobs, ranks, event counts, recipe outputs,
sampled GPU metrics, warnings and what was not loaded (`nsight-analyze info`, `Workspace.info()`
and the report's workspace section read it).

Why a library module: the API and the report need the document without the command's rendering
(nothing below commands/ imports a command module).
"""

from __future__ import annotations

from typing import Any

import duckdb

from ..render.data import records
from ..render.table import PlainTable
from .duck import has_relation
from .query_layer import statements

SQL = statements("store/workspace_info")

EVENT_COUNTS = ("kernels", "memops", "cuda_api", "sync", "nvtx", "gpu_metrics")
LOADED = SQL["loaded"]  # files rows of loaded files (the others: failed/skipped/ignored)


def loaded_rows(con: duckdb.DuckDBPyConnection, column: str) -> list[tuple]:
    """(path, column) of the loaded files, in file order."""
    return con.execute(SQL.sql("loaded_file_column", column=column, loaded=LOADED)).fetchall()


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    """The result of `sql` as JSON-able dicts, from fetchall: `info` imports no pandas, and an
    integer column with a NULL stays integers (a DataFrame made them floats: pid 4242.0)."""
    return records(PlainTable.from_cursor(con.execute(sql)))


def job_rows(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """One row per job (ranks.job, set by the analysis' job step): ranks present and world size."""
    return _rows(con, SQL["job_rows"])


def recipe_rows(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """The Nsight Systems recipe outputs found in the loaded inputs (read or not, with the ranks
    their rows went to); empty for a workspace made before recipe outputs were read."""
    try:
        return _rows(con, SQL["recipe_rows"])
    except duckdb.CatalogException:
        return []


def gpu_metric_files(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Per file with sampled GPU metrics (nsys GPU metrics, DCGM): GPUs, metrics, samples, scrapes,
    wall-clock span and the ranks the samples were matched to (docs/dcgm.md)."""
    try:
        return _rows(con, SQL.sql("gpu_metric_files", loaded=LOADED))
    except duckdb.BinderException:  # a workspace made before gpu_metrics had source/file_id
        return []


def workspace_info(con: duckdb.DuckDBPyConnection) -> dict:
    """Files, versions, ranks, GPUs, event counts, time span and warnings of a workspace.

    `files` are the loaded files; `not_loaded` the files an ingest saw but did not load (status
    failed, skipped or ignored, with the reason), as the last ingest that saw each path left them.
    """
    files = _rows(con, SQL.sql("loaded_files", loaded=LOADED))
    not_loaded = _rows(con, SQL.sql("files_not_loaded", loaded=LOADED))
    ranks = _rows(con, SQL["rank_rows"])
    jobs = job_rows(con)
    counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in EVENT_COUNTS}
    recipes = recipe_rows(con)
    # tp_capture: that span over the GPU operations, stored per rank (not yet analysed: none)
    ops = "tp_capture" if has_relation(con, "tp_capture") else SQL["event_spans"]
    span = _rows(con, SQL.sql("rank_spans", ops=ops))
    warnings = [f"{p}: {w}" for p, ws in loaded_rows(con, "warnings") for w in ws]
    skipped = [f"{p}: {s}" for p, ss in loaded_rows(con, "skipped") for s in ss]
    if counts["nvtx"] == 0:
        warnings.append("no NVTX ranges: steps cannot come from NVTX")
    if counts["kernels"] == 0 and counts["memops"] == 0:
        warnings.append("no GPU activity in the workspace")
    # the nsys exports' versions (a recipe output's column holds the recipe's runtime version)
    nsys = [f["nsys_version"] for f in files if f["source_format"] == "nsys-sqlite"]
    versions = sorted({v for v in nsys if v is not None})
    if len(versions) > 1:
        warnings.append(f"ranks were exported by different nsys versions: {', '.join(versions)}")
    if ranks:
        present = {int(r["rank"]) for r in ranks}
        missing = sorted(set(range(max(present) + 1)) - present)
        if missing:
            warnings.append(
                f"ranks missing from the workspace: {missing[:20]}{' ...' if len(missing) > 20 else ''}"
            )
    for job in jobs:
        if not job["complete"]:
            warnings.append(
                f"job {job['job']} is partial: {job['label']} present; waits and skew are reported only for "
                "collectives whose participants are all present, point-to-point kernels only with their peer"
            )
    return {
        "files": files,
        "jobs": jobs,
        "ranks": ranks,
        "event_counts": counts,
        "span": span,
        "warnings": warnings,
        "skipped": skipped,
        "not_loaded": not_loaded,
        "recipe_outputs": recipes,
        "gpu_metric_files": gpu_metric_files(con),
    }
