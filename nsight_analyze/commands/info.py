"""`nsight-analyze info`: what is in a workspace, and what it cannot answer."""

from __future__ import annotations

import click
import duckdb
import pandas as pd

from ..clihelp import db_option, format_option
from ..render import print_table, records, to_json
from ..workspace import open_workspace

EVENT_COUNTS = ("kernels", "memops", "cuda_api", "sync", "nvtx", "gpu_metrics")


def workspace_info(con: duckdb.DuckDBPyConnection) -> dict:
    """Files, versions, ranks, GPUs, event counts, time span and warnings of a workspace."""
    files = con.execute(
        """SELECT file_id, path, source_format, nsys_version, schema_version, status,
                  len(warnings) AS n_warnings, len(skipped) AS n_skipped
           FROM files ORDER BY file_id"""
    ).df()
    ranks = con.execute(
        """SELECT rank, file_id, pid, hostname, device_id, gpu_name, rank_source, clock_offset_ns,
                  alignment_method
           FROM ranks ORDER BY rank"""
    ).df()
    counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in EVENT_COUNTS}
    span = con.execute(
        """SELECT rank, min(start_ns) AS first_ns, max(end_ns) AS last_ns FROM
           (SELECT rank, start_ns, end_ns FROM kernels UNION ALL SELECT rank, start_ns, end_ns FROM memops)
           GROUP BY rank ORDER BY rank"""
    ).df()
    warnings = [
        f"{p}: {w}"
        for p, ws in con.execute("SELECT path, warnings FROM files ORDER BY file_id").fetchall()
        for w in ws
    ]
    skipped = [
        f"{p}: {s}"
        for p, ss in con.execute("SELECT path, skipped FROM files ORDER BY file_id").fetchall()
        for s in ss
    ]
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
    broken = con.execute("SELECT value FROM meta WHERE key = 'broken_queries'").fetchone()
    if broken and broken[0]:
        warnings.append(f"views that failed to load: {broken[0]}")
    return {
        "files": records(files),
        "ranks": records(ranks),
        "event_counts": counts,
        "span": records(span),
        "warnings": warnings,
        "skipped": skipped,
    }


@click.command("info")
@db_option
@format_option("table", "json")
def command(db: str, fmt: str) -> None:
    """Files, versions, ranks, GPUs, event counts, time span, warnings."""
    con = open_workspace(db, read_only=True)
    try:
        info = workspace_info(con)
    finally:
        con.close()
    if fmt == "json":
        print(to_json(info))
        return
    print_table(pd.DataFrame(info["files"]), title="files")
    print_table(pd.DataFrame(info["ranks"]), title="ranks")
    print_table(pd.DataFrame([info["event_counts"]]), title="events")
    for line in info["warnings"]:
        print(f"warning: {line}")
    for line in info["skipped"]:
        print(f"not loaded: {line}")
