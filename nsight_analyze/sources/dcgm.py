"""DCGM GPU metrics: dcgm-exporter scrapes (Prometheus text), Prometheus query JSON, `dcgmi dmon`.

Why: in production nobody runs nsys on every node, but dcgm-exporter scrapes every GPU every few
seconds (`DCGM_FI_PROF_PIPE_TENSOR_ACTIVE`, `..._SM_ACTIVE`, `..._DRAM_ACTIVE`,
`DCGM_FI_DEV_GPU_UTIL`, power, clocks). Those samples go into the same `gpu_metrics` table as
the nsys GPU-metrics samples (`source` = 'dcgm'), keyed by `host` and `gpu_uuid` so samples
without a trace still say which GPU they are; `match_ranks` sets `rank` (and the rank's file
time `timestamp_ns`) where a rank of the workspace ran on that GPU (schema.sql documents the
columns, docs/dcgm.md the formats and the matching).

Three layouts are read:

* Prometheus text exposition format, as `curl host:9400/metrics` prints it: one snapshot, or
  repeated scrapes appended to one file. A scrape's time comes from the samples' own timestamps
  (the format's optional third field, ms), else from a comment line before the scrape
  (`# scrape 2026-12-01T12:00:00Z`, `# timestamp 1764590400123`, or a bare epoch/ISO time); a
  series that repeats without either starts a new (untimed) scrape. Parsed with
  prometheus_client's parser, never by hand.
* Prometheus HTTP API JSON (`/api/v1/query` vector or `/api/v1/query_range` matrix).
* `dcgmi dmon` tables (`# Entity  GPUTL SMACT TENSO ...` headers, `GPU 0  ...` rows), with an
  optional time stamp before the entity (`dcgmi dmon | ts`). Columns are stored under their
  DCGM field names (SMACT -> DCGM_FI_PROF_SM_ACTIVE).

Nothing is dropped silently: samples that are not stored (not a DCGM field, no GPU identity,
N/A or non-finite values) are counted in the file's `skipped` list; a line that is not of the
format fails the file with one line naming it.

This module is the source interface (sniff, probe, load, match_ranks); the layouts are parsed by
dcgm_formats.py.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from ..store.query_layer import statements
from .base import BadInput, LoadResult, Probe
from .dcgm_formats import COLUMNS, layout, read, read_head

SQL = statements("sources/dcgm")
SUFFIXES = (".prom", ".txt", ".log", ".metrics", ".json", ".dmon", "")


def sniff(path: Path) -> bool:
    """A file whose first 64 KiB hold DCGM field names in one of the three layouts."""
    path = Path(path)
    if path.name.lower().endswith(".gz"):
        return False
    try:
        return layout(read_head(path)) is not None
    except OSError:
        return False


def probe(path: Path) -> Probe:
    """DCGM data carries no ranks (processes=[]); ranks are matched by host and GPU after the ingest."""
    try:
        kind = layout(read_head(Path(path)))
    except OSError as exc:
        raise BadInput(f"unreadable ({exc.strerror or exc})") from exc
    if kind is None:
        raise BadInput("not a DCGM scrape, Prometheus query export or dcgmi dmon table")
    return Probe(format=kind, processes=[])


# --------------------------------------------------------------------------- load


def load(con: duckdb.DuckDBPyConnection, path: Path, file_id: int, ranks: dict[int, int], probe: Probe):
    """Insert the samples into gpu_metrics (source 'dcgm', rank NULL until match_ranks)."""
    rows = read(Path(path), probe.format)
    if rows.n == 0:
        why = "; ".join(f"{n} {w}" for w, n in sorted(rows.not_stored.items())) or "no samples"
        raise BadInput(f"no DCGM GPU samples ({why})")
    result = LoadResult(warnings=list(rows.warnings))
    import pandas as pd  # here, not at the top: sniffing every .json/.txt of an ingest imports this module

    frame = pd.DataFrame(rows.data, columns=COLUMNS)
    frame["sample"] = frame["sample"].astype("Int64")
    frame["utc_ns"] = frame["utc_ns"].astype("Int64")
    frame["gpu_id"] = frame["gpu_id"].astype("Int64")
    con.register("_dcgm_rows", frame)
    try:
        n = con.execute(SQL.sql("insert_samples", file_id=int(file_id))).fetchone()[0]
    finally:
        con.unregister("_dcgm_rows")
    result.counts["gpu_metrics"] = int(n)
    for why, count in sorted(rows.not_stored.items()):
        what = why
        if why.startswith("samples of metrics that are not DCGM") and rows.other_metrics:
            names = sorted(rows.other_metrics)
            what += f": {', '.join(names[:5])}{' ...' if len(names) > 5 else ''}"
        result.skipped.append(f"{probe.format}: {count} {what}")
    return result


# --------------------------------------------------------------------------- ranks

MATCH_SQL = SQL.sql(
    "rank_matches",
    g_uuid=SQL.sql("norm_uuid", column="g.uuid"),
    g_bus=SQL.sql("norm_bus", column="g.bus_location"),
    ranks_host=SQL.sql("short_host", column="hostname"),
    s_uuid=SQL.sql("norm_uuid", column="s.gpu_uuid"),
    s_host=SQL.sql("short_host", column="s.host"),
    gpu_host=SQL.sql("short_host", column="gpu.hostname"),
    s_bus=SQL.sql("norm_bus", column="s.pci"),
)


def match_ranks(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Set rank, rank_match and the rank's file time (timestamp_ns) on DCGM samples of a rank's GPU.

    Evidence, strongest first: the GPU UUID (DCGM's `UUID` label = the trace's GPU uuid); the host
    and PCI bus id; the host and GPU index (DCGM's `gpu` = NVML index, compared with the rank's CUDA
    ordinal: equal unless CUDA_VISIBLE_DEVICES reorders); for samples that name no host (`dcgmi
    dmon` tables, scrapes without host labels), the GPU index alone, and only while the
    workspace's ranks name at most one host: across hosts an index names one GPU per host. A GPU
    that several ranks claim with equal evidence is left unmatched and said. Recomputed from
    scratch on every ingest, so files may come in any order. Returns notes for the ingest report.
    """
    if not con.execute("SELECT count(*) FROM gpu_metrics WHERE source = 'dcgm'").fetchone()[0]:
        return []
    matches = con.execute(MATCH_SQL).df()
    con.execute(SQL["clear_matches"])
    unique = matches[matches["ranks"] == 1]
    con.register("_dcgm_match", unique)
    try:
        con.execute(SQL["apply_matches"])
    finally:
        con.unregister("_dcgm_match")
    notes = []
    total = con.execute(SQL["sampled_gpus"]).fetchone()[0]
    ranked = con.execute("SELECT count(*) FROM ranks").fetchone()[0]
    if ranked:
        by = ", ".join(f"{n} by {how}" for how, n in unique.groupby("how").size().items()) or "none"
        notes.append(f"DCGM: {len(unique)} of {total} sampled GPUs matched to a rank ({by})")
    hostless = con.execute(SQL["hostless_gpus"]).fetchone()[0]
    hosts = [h for (h,) in con.execute(SQL["rank_hosts"]).fetchall()]
    if ranked and hostless and len({h.split(".")[0].lower() for h in hosts}) > 1:
        shown = ", ".join(hosts[:4]) + (" ..." if len(hosts) > 4 else "")
        notes.append(
            f"DCGM: {hostless} sampled GPU(s) name no host (dcgmi dmon, or no Hostname label) and the "
            f"ranks run on {len(hosts)} hosts ({shown}): a GPU index is ambiguous across hosts, so their "
            "samples are not given a rank"
        )
    for row in matches[matches["ranks"] > 1].itertuples(index=False):
        notes.append(
            f"DCGM: GPU {row.gpu_id} ({row.gpu_uuid or 'no UUID'}) on {row.host or 'an unnamed host'} "
            f"matches {row.ranks} ranks "
            f"by {row.how}: its samples are not given a rank"
        )
    return notes
