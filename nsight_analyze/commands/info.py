"""`nsight-analyze info`: what is in a workspace, and what it cannot answer."""

from __future__ import annotations

import click
import duckdb
import pandas as pd

from ..clihelp import db_option, format_option
from ..render import echo, print_table, records, to_json
from ..workspace import open_workspace

EVENT_COUNTS = ("kernels", "memops", "cuda_api", "sync", "nvtx", "gpu_metrics")
LOADED = "coalesce(status, 'ok') = 'ok'"  # files rows of loaded files (the others: failed/skipped/ignored)


def loaded_rows(con: duckdb.DuckDBPyConnection, column: str) -> list[tuple]:
    """(path, column) of the loaded files, in file order."""
    return con.execute(f"SELECT path, {column} FROM files WHERE {LOADED} ORDER BY file_id").fetchall()


def job_rows(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """One row per job (ranks.job, set by the analysis' job step): ranks present and world size."""
    return con.execute(
        """SELECT coalesce(job, 1) AS job, count(*) AS ranks, max(world_size) AS world_size,
                  max(world_size) IS NULL OR count(*) >= max(world_size) AS complete,
                  min(rank) AS first_rank, max(rank) AS last_rank,
                  CASE WHEN max(world_size) IS NULL
                       THEN count(*) || CASE WHEN count(*) = 1 THEN ' rank' ELSE ' ranks' END
                            || ' (world size unknown)'
                       ELSE count(*) || ' of ' || max(world_size) || ' ranks' END AS label
           FROM ranks GROUP BY ALL ORDER BY 1"""
    ).df()


def workspace_info(con: duckdb.DuckDBPyConnection) -> dict:
    """Files, versions, ranks, GPUs, event counts, time span and warnings of a workspace.

    `files` are the loaded files; `not_loaded` the files an ingest saw but did not load (status
    failed, skipped or ignored, with the reason), as the last ingest that saw each path left them.
    """
    files = con.execute(
        f"""SELECT file_id, path, source_format, nsys_version, schema_version, status,
                  len(warnings) AS n_warnings, len(skipped) AS n_skipped
           FROM files WHERE {LOADED} ORDER BY file_id"""
    ).df()
    not_loaded = con.execute(
        f"""SELECT path, status, coalesce(array_to_string(warnings, '; '), '') AS reason, ingested_at
           FROM files WHERE NOT {LOADED} ORDER BY file_id"""
    ).df()
    ranks = con.execute(
        """SELECT rank, job, job_rank, file_id, pid, hostname, device_id, gpu_name, rank_source, world_size,
                  clock_offset_ns, alignment_method
           FROM ranks ORDER BY rank"""
    ).df()
    jobs = job_rows(con)
    counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in EVENT_COUNTS}
    span = con.execute(
        """SELECT rank, min(start_ns) AS first_ns, max(end_ns) AS last_ns FROM
           (SELECT rank, start_ns, end_ns FROM kernels UNION ALL SELECT rank, start_ns, end_ns FROM memops)
           GROUP BY rank ORDER BY rank"""
    ).df()
    warnings = [f"{p}: {w}" for p, ws in loaded_rows(con, "warnings") for w in ws]
    skipped = [f"{p}: {s}" for p, ss in loaded_rows(con, "skipped") for s in ss]
    if counts["nvtx"] == 0:
        warnings.append("no NVTX ranges: steps cannot come from NVTX")
    if counts["kernels"] == 0 and counts["memops"] == 0:
        warnings.append("no GPU activity in the workspace")
    versions = sorted({v for v in files["nsys_version"].dropna()})
    if len(versions) > 1:
        warnings.append(f"ranks were exported by different nsys versions: {', '.join(versions)}")
    if len(ranks):
        expected = set(range(int(ranks["rank"].max()) + 1))
        missing = sorted(expected - set(ranks["rank"].astype(int)))
        if missing:
            warnings.append(
                f"ranks missing from the workspace: {missing[:20]}{' ...' if len(missing) > 20 else ''}"
            )
    for job in jobs.itertuples(index=False):
        if not job.complete:
            warnings.append(
                f"job {job.job} is partial: {job.label} present; waits and skew are reported only for "
                "collectives whose participants are all present, point-to-point kernels only with their peer"
            )
    return {
        "files": records(files),
        "jobs": records(jobs),
        "ranks": records(ranks),
        "event_counts": counts,
        "span": records(span),
        "warnings": warnings,
        "skipped": skipped,
        "not_loaded": records(not_loaded),
    }


@click.command("info")
@db_option
@format_option("table", "json")
def command(db: str, fmt: str) -> None:
    """Files, versions, ranks, GPUs, event counts, time span, warnings."""
    con = open_workspace(db, read_only=True, analyse=False)  # the tables only: no stored results needed
    try:
        info = workspace_info(con)
    finally:
        con.close()
    if fmt == "json":
        print(to_json(info))
        return
    print_table(pd.DataFrame(info["files"]), title="files")
    if len(info["jobs"]) > 1:
        echo(f"{len(info['jobs'])} jobs found: ranks of different jobs are never compared (docs/metrics.md)")
        print_table(pd.DataFrame(info["jobs"]), title="jobs")
    elif info["jobs"]:
        echo(f"1 job: {info['jobs'][0]['label']}")
    print_table(pd.DataFrame(info["ranks"]), title="ranks")
    print_table(pd.DataFrame([info["event_counts"]]), title="events")
    for line in info["warnings"]:  # echo: wrapped to the terminal's width
        echo(f"warning: {line}", hang="    ")
    for line in info["skipped"]:
        echo(f"not loaded: {line}", hang="    ")
    for row in info["not_loaded"]:  # worded like ingest's own line for the file
        echo(f"{row['status']}: {row['path']}" + (f": {row['reason']}" if row["reason"] else ""), hang="    ")
