"""Why a rank is slow (attribution) and what fixing each cause would buy (what-if), as plain data.

Both are SQL (queries/job/rank_attribution.sql, queries/whatif/whatif.sql, computed once per refresh); this
module only reads their small result tables (queries/answers/whatif.sql) and shapes them: the JSON
documents of docs/whatif.md and one line of evidence per blamed rank. Python loops over result rows only.
"""

from __future__ import annotations

from typing import Any

import duckdb

from .no_data import require_ranks
from .store.duck import fetch_records
from .store.query_layer import statements

SQL = statements("answers/whatif")

READS = ("whatif", "rank_attribution")  # the stored results it reads (analysis.refresh computes them)
SCENARIOS = ("slowest-rank-at-median", "comms-hidden", "no-input-stalls", "no-launch-gaps", "no-sync-stalls")
CAUSES = ("slow-gpu", "more-work", "slow-host", "late-input", "slow-link")
SCENARIO_TEXT = {
    "slowest-rank-at-median": "the slow rank(s) ran at the median rank's speed",
    "comms-hidden": "communication were fully hidden behind compute",
    "no-input-stalls": "input stalls were removed",
    "no-launch-gaps": "launch gaps were removed (the most CUDA graphs can buy)",
    "no-sync-stalls": "synchronisation stalls were removed",
}


def _rows(con: duckdb.DuckDBPyConnection, sql: str, what: str) -> list[dict[str, Any]]:
    return fetch_records(con, sql, f"this workspace has no {what} yet; re-run `nsight-analyze ingest`")


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def scenarios(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """The what-if rows: per job, scenario and step (None = the whole job, means over steps)."""
    require_ranks(con, "replay (what-if)")
    rows = _rows(con, SQL["scenarios"], "what-if results")
    order = {s: i for i, s in enumerate(SCENARIOS)}
    rows.sort(key=lambda r: (r["job"], order.get(r["scenario"], 99), r["step"] is None, r["step"] or 0))
    return rows


def empty_reason(con: duckdb.DuckDBPyConnection) -> str:
    """Why the what-if table has no rows, from the conditions of queries/whatif/whatif.sql (docs/whatif.md).

    Why: an empty replay must read as "unknown, because ...", never as "nothing to gain"."""

    def one(sql: str) -> Any:
        try:
            return con.execute(sql).fetchone()[0]
        except duckdb.Error:
            return None

    if one("SELECT count(*) FROM whatif") is None:
        return "the workspace has no whatif table (re-run `nsight-analyze ingest`)"
    if not one("SELECT count(*) FROM steps WHERE step IS NOT NULL"):
        return (
            "no step windows (no NVTX step ranges, optimizer bursts or periodic kernels): "
            "the replay runs per step"
        )
    partial = one(SQL["partial_jobs"])
    if partial and not one("SELECT count(*) FROM jobs WHERE complete"):
        return (
            f"the job is partial ({partial}): a collective ends when its last participant arrives, "
            "so the replay needs every rank of the job"
        )
    full = one(SQL["steps_on_every_rank"])
    if not full:
        return "no step is present on every rank of the job (the replay couples all ranks)"
    budget = one(SQL["whatif_max_events"])
    if budget is not None and budget < 1:
        return f"settings.whatif_max_events = {budget} leaves no step to replay"
    return "unknown: the replay produced no rows although steps are present on every rank"


def whatif_json(rows: list[dict[str, Any]], reason: str | None = None) -> dict[str, Any]:
    """The stable document of `nsight-analyze whatif --format json` (docs/whatif.md)."""
    jobs = {r["job"] for r in rows}
    out = []
    for r in rows:
        row = {
            "scenario": r["scenario"],
            "step": _int(r["step"]),
            "actual_step_time_ns": _int(r["actual_step_time_ns"]),
            "step_time_ns": _int(r["step_time_ns"]),
            "gain_ns": _int(r["gain_ns"]),
            "replayed_actual_ns": _int(r["replayed_actual_ns"]),
            "fixed_ranks": [int(x) for x in r["fixed_ranks"].split(",")] if r["fixed_ranks"] else None,
        }
        if len(jobs) > 1:
            row["job"] = int(r["job"])
        out.append(row)
    doc: dict[str, Any] = {"scenarios": out}
    if not out:  # unknown, never "nothing to gain": say why (docs/whatif.md)
        doc["reason"] = reason or "unknown"
    return doc


def document(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """The `whatif --format json` document of a workspace; empty scenarios carry the reason."""
    rows = scenarios(con)
    return whatif_json(rows, None if rows else empty_reason(con))


def attribution(con: duckdb.DuckDBPyConnection, steps: bool = False) -> list[dict[str, Any]]:
    """Per rank (whole job; with steps=True also per step) its excess over the median rank by cause."""
    which = "attribution_per_rank_and_step" if steps else "attribution_per_rank"
    rows = _rows(con, SQL.sql(which, columns=SQL["attribution_columns"]), "attribution results")
    for r in rows:
        r["evidence"] = evidence(r)
    return rows


def evidence(r: dict[str, Any]) -> str | None:
    """One sentence of evidence for a row's cause (None when nothing is blamed)."""
    from .render.units import format_duration as d

    cause = r.get("cause")
    if cause == "slow-gpu":
        score = r.get("gpu_score")
        return (
            f"the same {r['kernels_compared']} kernel(s) every rank runs equally often take "
            f"{d(r['slow_gpu_ns'])} longer than on the median rank"
            + (
                f" (speed score {score:.2f}: fastest rank's median / this rank's, weighted by time)"
                if score
                else ""
            )
        )
    if cause == "more-work":
        return (
            f"{int(r['kernel_count'])} kernels against the median rank's {r['median_kernel_count']:g}: "
            f"{d(r['more_work_ns'])} more GPU work"
        )
    if cause == "slow-host":
        return (
            f"launch gaps and host-bound idle of {d(r['host_gap_ns'])} against the median rank's "
            f"{d(r['median_host_gap_ns'])}: the GPU waits for this rank's host"
        )
    if cause == "late-input":
        return (
            f"input stalls of {d(r['input_stall_ns'])} against the median rank's "
            f"{d(r['median_input_stall_ns'])}"
        )
    if cause == "slow-link":
        per = ""
        if r.get("transfer_bytes"):
            per = f" ({r['transfer_ns'] / r['transfer_bytes'] * 1e6:.3g} ns/MB)"
        return (
            f"its {int(r['n_collectives'])} collective(s) finish transferring {d(r['transfer_ns'])}{per} "
            f"after the last arrival, against {d(r['median_transfer_ns'])} for the median participant"
        )
    return None
