"""The two sides of a comparison: workspaces (or traces ingested into temporary ones), each run's
analysis results copied once into temp tables, its findings and its MFU.

Per-side reads run under `USE <catalog>` so that the workspace's own views and macros resolve.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from ..errors import UserError
from .settings import SIDES


def is_workspace(path: Path) -> bool:
    """A DuckDB database file (magic 'DUCK' at byte 8), not a trace to ingest."""
    if not path.is_file():
        return False
    with path.open("rb") as fh:
        return fh.read(12)[8:12] == b"DUCK"


@contextmanager
def workspaces(before: str | Path, after: str | Path) -> Iterator[tuple[Path, Path, list[str]]]:
    """Workspace paths for both inputs; trace folders/files are ingested into temporary ones."""
    from ..ingest import ingest

    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="nsight-compare-") as tmp:
        out = []
        for side, given in zip(SIDES, (before, after)):
            path = Path(given)
            if not path.exists():
                raise UserError(
                    f"{side} input {path} does not exist (give a workspace .duckdb or a trace folder)"
                )
            if is_workspace(path):
                out.append(path)
                continue
            db = Path(tmp) / f"{side}.duckdb"
            report = ingest([path], db)
            if not report.by_status("ok"):
                why = "; ".join(f"{o.path.name}: {o.message}" for o in report.outcomes if o.message)
                raise UserError(
                    f"nothing from {path} could be ingested for {side}" + (f" ({why})" if why else "")
                )
            ok = len(report.by_status("ok"))
            notes.append(f"{side}: ingested {ok} file(s) from {path} into a temporary workspace")
            out.append(db)
        yield out[0], out[1], notes


def _refresh(path: Path) -> str | None:
    """Bring the workspace's stored views up to date (they are what ATTACH sees); a note if we cannot."""
    from ..workspace import open_workspace

    try:
        open_workspace(path, read_only=True).close()
    except UserError as exc:
        return f"{path}: views not refreshed ({exc}); results use the views stored in the file"
    return None


def _df(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> pd.DataFrame:
    return con.execute(sql, params or []).df()


def _materialise(con: duckdb.DuckDBPyConnection, cat: str, side: str) -> None:
    """Temp tables {side}_tp / _src / _win / _imb / _rr: each analysis result read once per side.

    `imbalance` and `rank_rollup` are read by name when the workspace stores them as tables; while
    they are views, the same macros they are defined with run over the copied partition instead
    (imbalance = merge_imbalance_of('time_partition'), likewise the rollup), so the partition is
    not recomputed twice more.
    """
    con.execute(f"USE {cat}")
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE {side}_tp AS SELECT * FROM time_partition")
        con.execute(f"CREATE OR REPLACE TEMP TABLE {side}_steps AS SELECT * FROM steps")
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {side}_src AS SELECT rank, min(source) AS source, "
            f"count(*) AS windows FROM {side}_steps GROUP BY rank"
        )
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {side}_win AS SELECT rank, min(start_ns) AS lo, "
            f"max(end_ns) AS hi FROM {side}_steps GROUP BY rank"
        )
        stored = {
            r[0]
            for r in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()"
            ).fetchall()
        }
        if not {"imbalance", "rank_rollup"} <= stored:
            try:
                con.execute(
                    f"CREATE OR REPLACE TEMP TABLE {side}_imb AS "
                    f"SELECT * FROM merge_imbalance_of('{side}_tp')"
                )
                con.execute(
                    f"CREATE OR REPLACE TEMP TABLE {side}_rr AS "
                    f"SELECT * FROM merge_rank_rollup_of('{side}_tp', '{side}_imb')"
                )
                return
            except duckdb.Error:
                pass
        con.execute(f"CREATE OR REPLACE TEMP TABLE {side}_imb AS SELECT * FROM imbalance")
        con.execute(f"CREATE OR REPLACE TEMP TABLE {side}_rr AS SELECT * FROM rank_rollup")
    except duckdb.CatalogException as exc:
        raise UserError(
            f"the {side} workspace lacks a view compare needs ({str(exc).splitlines()[0]}); re-run ingest"
        ) from None


def _findings(con: duckdb.DuckDBPyConnection, cat: str) -> tuple[dict[str, Any] | None, str | None]:
    """diagnose() of one side, reduced to what a diff needs, with the thresholds and mean step it
    used (to place an absent finding's magnitude); None when diagnose is unavailable."""
    try:
        from ..diagnose import diagnose
    except ImportError:
        return None, "findings: diagnose is not available in this installation"
    con.execute(f"USE {cat}")
    try:
        found = diagnose(con)
    except (duckdb.Error, UserError) as exc:
        return None, f"findings: diagnose failed ({str(exc).splitlines()[0]})"
    rows = [
        {
            "id": f.id,
            "title": f.title,
            "severity": f.severity,
            "kind": f.kind,
            "ranks": list(f.ranks),
            "recoverable_ns_per_step": f.recoverable_ns_per_step,
            "recoverable_pct": f.recoverable_pct,
            "metrics": dict(f.metrics),
        }
        for f in found
    ]
    job = getattr(found, "job", None) or {}
    return {
        "findings": rows,
        "thresholds": dict(getattr(found, "thresholds", None) or {}),
        "mean_step_ns": job.get("mean_step_ns"),
    }, None


def _mfu(con: duckdb.DuckDBPyConnection, cat: str, model_flops_per_step: float | None) -> dict[str, Any]:
    """MFU/HFU of one side when known (MFU needs the model FLOPs, HFU Nsight Compute data)."""
    try:
        from ..mfu import hfu_mfu_summary
    except ImportError:
        return {"mfu": None, "hfu": None, "coverage_pct": None, "note": "mfu module not available"}
    con.execute(f"USE {cat}")
    try:
        s = hfu_mfu_summary(con, model_flops_per_step=model_flops_per_step)
    except (duckdb.Error, UserError, ValueError) as exc:
        return {"mfu": None, "hfu": None, "coverage_pct": None, "note": str(exc).splitlines()[0]}
    return {
        "mfu": s.get("mfu"),
        "hfu": s.get("hfu"),
        "coverage_pct": s.get("coverage_pct"),
        "windows": s.get("windows"),
        "note": None,
    }
