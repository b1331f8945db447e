"""Communication by parallelism dimension: the stored comm_groups / comm_ops tables as plain data.

The SQL (queries/comms/comm_kernels.sql, _comm_members.sql, comm_groups.sql, comm_ops.sql) names each
communicator's dimension and sums its time; this module only aggregates those few rows (one per
communicator), adds the link's peak from the GPU data and the fixes that fit each dimension's
exposed collectives (rules/comm_families.py, the one list the findings read too).
"""

from __future__ import annotations

from typing import Any

import duckdb

from .errors import UserError
from .gpus import table as gpu_table
from .no_data import require_ranks
from .plain import missing
from .store.duck import fetch_records
from .store.query_layer import statements

SQL = statements("answers/comms")

READS = ("collectives", "comm_groups", "comm_kernels", "comm_ops", "_comm_members")  # computed on first read
BY = ("dimension", "communicator", "collective")
DIMENSIONS = ("dp", "fsdp", "tp", "pp", "ep", "unknown")


def _advice(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Per job and exposed dimension: the fixes of the collectives that hold most of its exposed time.

    Why not a text per dimension: the fixes have one home, rules/comm_families.py (FIXES, FAMILY_SQL,
    `family_fixes`), which the `exposed-comm` findings and `dominant-kernel` read too; a dimension
    that is unknown gets its collectives' fixes (send/recv: the pipeline schedule, never DDP
    bucketing) and how to make the dimension known, instead of nothing. The families are summed in
    SQL over comm_ops (one row per communicator and collective)."""
    from .rules.comm_families import FAMILY_SQL, family_fixes  # rules import this module: import late

    fams = _fetch(con, SQL.sql("exposed_families", family=FAMILY_SQL))
    out: list[dict[str, Any]] = []
    for key in dict.fromkeys((int(f["job"]), str(f["dimension"])) for f in fams):
        rows = [f for f in fams if (int(f["job"]), str(f["dimension"])) == key]
        fixes = family_fixes(rows, key[1])
        out.append(
            {
                "job": key[0],
                "dimension": key[1],
                "exposed_ns": int(rows[0]["dimension_exposed_ns"]),
                "families": [str(f["family"]) for f in rows if f["taken"]],
                "advice": " ".join(f"{x.action} (trade-off: {x.trade_off})." for x in fixes),
            }
        )
    return out


def _fetch(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    """The rows of `sql` as dicts (no DataFrame: `comms` imports no pandas)."""
    return fetch_records(con, sql, "this workspace lacks a table `comms` needs ({missing}); re-run ingest")


def nvlink_peak_gbps(con: duckdb.DuckDBPyConnection) -> tuple[float | None, str]:
    """Per-direction NVLink peak (GB/s) of the job's GPU model from the peak table, and why.

    gpus.csv lists NVLink as total bidirectional GB/s per GPU; NCCL's bus bandwidth is per
    direction, so the peak it is held against is half of it. None when the GPU or its NVLink
    figure is unknown (never guessed)."""
    names = [r[0] for r in con.execute(SQL["gpu_models"]).fetchall()]
    if len(names) != 1:
        return None, "GPU model unknown" if not names else "ranks have different GPU models"
    peak = gpu_table.lookup(names[0])
    if peak is None or peak.model is None:
        return None, f"{names[0]!r} is not in the peak table"
    value = next(r for r in gpu_table.rows() if r["model"] == peak.model).get("nvlink_gbs")
    if missing(value):
        return None, f"no NVLink figure for {peak.model}"
    return float(value) / 2, f"{peak.model}: NVLink {float(value):g} GB/s bidirectional, per direction"


def _link_peak(link: str, nvlink: float | None) -> float | None:
    return nvlink if link == "nvlink" else None  # the network's peak is not in the traces


def comms(con: duckdb.DuckDBPyConnection, by: str = "dimension") -> dict[str, Any]:
    """Rows of communication time per dimension, communicator or (communicator, collective)."""
    if by not in BY:
        raise UserError(f"unknown --by {by!r}: choose one of {', '.join(BY)}")
    require_ranks(con, "break down communication")
    groups = _fetch(con, SQL["communicators"])
    nvlink, nvlink_why = nvlink_peak_gbps(con)
    several = len({g["job"] for g in groups}) > 1
    if by == "communicator":
        rows = groups
    elif by == "collective":
        rows = _fetch(con, SQL["communicator_collectives"])
    else:
        rows = _by_dimension(con)
    out = []
    for r in rows:
        row = {k: (None if missing(v) else v) for k, v in r.items()}
        total, exposed = row.get("total_ns") or 0, row.get("exposed_ns") or 0
        row["exposed_pct"] = 100.0 * exposed / total if total else None
        row["link_peak_gbps"] = _link_peak(row.get("link") or "unknown", nvlink)
        bw = row.get("busbw_gbps")
        peak = row["link_peak_gbps"]
        row["busbw_peak_pct"] = 100.0 * bw / peak if bw is not None and peak else None
        if row.get("members") is not None:
            row["members"] = [int(x) for x in row["members"]]
        out.append(row)
    advice, notes = _advice(con), []
    for g in groups:
        if g["dimension"] == "unknown":
            notes.append(f"{g['group_key']} ({g['ops']}): dimension unknown: {g['basis']}")
    links = {g["link"] for g in groups}
    if "network" in links:
        notes.append("network link peak: unknown (the traces do not record the NICs' speed)")
    if nvlink is None and "nvlink" in links:
        notes.append(f"NVLink peak: unknown ({nvlink_why})")
    return {
        "by": by,
        "several_jobs": bool(several),
        "rows": out,
        "advice": advice,
        "notes": notes,
        "nvlink_peak_gbps": nvlink,
        "nvlink_peak_basis": nvlink_why,
    }


def _by_dimension(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """comm_groups summed per (job, dimension), in DIMENSIONS order; busbw weighted by each group's
    total time (over the groups that have one); link: the groups' one link, else 'mixed'."""
    order = "[" + ", ".join(f"'{d}'" for d in DIMENSIONS) + "]"
    return _fetch(con, SQL.sql("dimensions", order=order))
