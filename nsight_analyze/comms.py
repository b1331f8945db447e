"""Communication by parallelism dimension: the stored comm_groups / comm_ops tables as plain data.

The SQL (queries/comm_kernels.sql, _comm_members.sql, comm_groups.sql, comm_ops.sql) names each
communicator's dimension and sums its time; this module only aggregates those few rows (one per
communicator), adds the link's peak from the GPU data and the advice that fits each dimension.
"""

from __future__ import annotations

from typing import Any

import duckdb

from . import gpus
from .duck import fetch_records
from .errors import UserError
from .no_data import require_ranks
from .plain import missing

BY = ("dimension", "communicator", "collective")
DIMENSIONS = ("dp", "fsdp", "tp", "pp", "ep", "unknown")

ADVICE = {
    "tp": (
        "Tensor-parallel collectives sit on the critical path of forward and backward: keep the TP "
        "group inside a node (NVLink), overlap TP communication with compute (sequence parallelism, "
        "communication/GEMM overlap such as Transformer Engine userbuffers), or lower the TP degree. "
        "Trade-off: a smaller TP degree puts more weights and activations on each GPU; overlap needs "
        "spare SMs and memory for the staged buffers."
    ),
    "dp": (
        "Data-parallel gradient reduction is exposed: overlap it with backward (DDP/FSDP bucketed "
        "reduction started as gradients become ready), tune the bucket size, reduce in bf16, or "
        "accumulate gradients over more micro-batches per reduction. Trade-off: larger buckets cut "
        "per-call latency but start later and overlap less; smaller ones overlap more but pay more "
        "launches; gradient accumulation changes the effective batch size."
    ),
    "fsdp": (
        "Sharded-parameter all-gathers / reduce-scatters are exposed: prefetch the next unit's "
        "all-gather (forward and backward prefetch), use larger FSDP units, or shard inside a node "
        "and replicate across nodes (HSDP). Trade-off: prefetching and larger units hold more "
        "unsharded parameters in memory; HSDP keeps more copies of the optimizer state."
    ),
    "pp": (
        "Pipeline send/recv time (it includes waiting for the neighbouring stage, i.e. the bubble) is "
        "exposed: use more micro-batches per step, an interleaved (virtual-pipeline) schedule, or "
        "fewer stages. Trade-off: more micro-batches need a smaller micro-batch or more activation "
        "memory; interleaving multiplies the point-to-point messages; fewer stages need more memory "
        "per GPU."
    ),
    "ep": (
        "Expert-parallel all-to-all is exposed: overlap token dispatch/combine with expert compute, "
        "keep the EP group inside a node, and balance the router load (capacity factor, auxiliary "
        "loss). Trade-off: overlap needs chunked dispatch (more launches); a smaller EP group holds "
        "more experts per GPU."
    ),
}


def _fetch(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    """The rows of `sql` as dicts (no DataFrame: `comms` imports no pandas)."""
    return fetch_records(con, sql, "this workspace lacks a table `comms` needs ({missing}); re-run ingest")


def nvlink_peak_gbps(con: duckdb.DuckDBPyConnection) -> tuple[float | None, str]:
    """Per-direction NVLink peak (GB/s) of the job's GPU model from the peak table, and why.

    gpus.csv lists NVLink as total bidirectional GB/s per GPU; NCCL's bus bandwidth is per
    direction, so the peak it is held against is half of it. None when the GPU or its NVLink
    figure is unknown (never guessed)."""
    names = [
        r[0]
        for r in con.execute(
            "SELECT DISTINCT COALESCE(g.name, r.gpu_name) FROM ranks r LEFT JOIN gpus g ON g.rank = r.rank "
            "WHERE COALESCE(g.name, r.gpu_name) IS NOT NULL"
        ).fetchall()
    ]
    if len(names) != 1:
        return None, "GPU model unknown" if not names else "ranks have different GPU models"
    peak = gpus.lookup(names[0])
    if peak is None or peak.model is None:
        return None, f"{names[0]!r} is not in the peak table"
    value = next(r for r in gpus.rows() if r["model"] == peak.model).get("nvlink_gbs")
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
    groups = _fetch(con, "SELECT * FROM comm_groups ORDER BY job, dimension, group_key")
    nvlink, nvlink_why = nvlink_peak_gbps(con)
    several = len({g["job"] for g in groups}) > 1
    if by == "communicator":
        rows = groups
    elif by == "collective":
        rows = _fetch(con, "SELECT * FROM comm_ops ORDER BY job, dimension, group_key, op")
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
    advice, notes = [], []
    dims = rows if by == "dimension" else _by_dimension(con)
    for d in sorted(dims, key=lambda d: -d["exposed_ns"]):
        if d["dimension"] in ADVICE and d["exposed_ns"] > 0:
            advice.append(
                {"job": int(d["job"]), "dimension": d["dimension"], "exposed_ns": int(d["exposed_ns"]),
                 "advice": ADVICE[d["dimension"]]}
            )  # fmt: skip
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
    return _fetch(
        con,
        f"""
        SELECT job, dimension, count(group_key) AS communicators, sum(kernels) AS kernels,
               sum(total_ns) AS total_ns, sum(exposed_ns) AS exposed_ns, sum(bytes) AS bytes,
               sum(busbw_gbps * total_ns) FILTER (WHERE busbw_gbps IS NOT NULL)
                   / nullif(sum(total_ns) FILTER (WHERE busbw_gbps IS NOT NULL), 0) AS busbw_gbps,
               CASE WHEN count(DISTINCT link) = 1 THEN min(link) ELSE 'mixed' END AS link
        FROM comm_groups
        GROUP BY job, dimension
        ORDER BY job, list_position({order}, dimension) NULLS LAST, dimension""",
    )
