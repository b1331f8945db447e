"""The two sides of a comparison: workspaces (or traces ingested into temporary ones), each run's
views of its stored analysis results, its findings and its MFU.

Per-side reads run under `USE <catalog>` so that the workspace's own views and macros resolve.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from ..errors import UserError
from ..store.query_layer import statements
from ..store.workspace import is_workspace
from .settings import SIDES

SQL = statements("compare/sides")


def _periodic_ranks(con: duckdb.DuckDBPyConnection) -> int:
    """How many ranks have their steps from a periodic kernel (settings.periodic_steps = 'on')."""
    try:
        return int(con.execute(SQL["periodic_ranks"]).fetchone()[0])
    except duckdb.CatalogException:
        return 0


def _one_job(db: Path, job: int | None, side: str, tmp: str, notes: list[str]) -> tuple[Path, int | None]:
    """A workspace of one job for this side: `db` itself, or, when it holds several jobs, the
    chosen job's files (`job`, else the one with the most ranks) ingested into a temporary one;
    with `db` itself, its number of ranks with periodic steps (read on the same connection).

    Why a workspace of its own: compare matches ranks by number, and every per-side read (its
    partition, kernels, findings) must see that job alone (docs/compare.md "Jobs").
    Opening `db` here is also what brings its stored results up to date (open_workspace)."""
    from ..ingest.run import ingest
    from ..store.job_scope import choose
    from ..store.workspace import open_workspace

    con = open_workspace(db, read_only=True)
    try:
        chosen = choose(con, job)
        if chosen is None or chosen.n_jobs <= 1:
            return db, _periodic_ranks(con)
        files = [Path(r[0]) for r in con.execute(SQL["job_files"], [chosen.job]).fetchall()]
    finally:
        con.close()
    missing = [f for f in files if not f.is_file()]
    if missing:
        raise UserError(
            f"{side}: job {chosen.job} of {db} was read from {missing[0]}, which is gone; compare re-reads "
            "a job's files when a workspace holds several jobs"
        )
    out = Path(tmp) / f"{side}-job{chosen.job}.duckdb"
    ingest(files, out)
    notes.append(f"{side}: " + (chosen.note(f"--{side}-job N") or ""))
    return out, None


def _without_periodic(db: Path, side: str, tmp: str, notes: list[str], periodic: int | None = None) -> Path:
    """`db`, or when its steps come from a periodic kernel (settings.periodic_steps = 'on'), a
    temporary copy analysed without them.

    Why: two windows cut from one run may repeat different kernels, so periodic "steps" of one
    capture are not the steps of the other; a side per periodic step against a side per capture
    window would weigh per-step partitions, kernels and findings against per-window ones. Both
    sides are then compared per capture window (NVTX and optimizer steps are kept).
    `periodic`: that count when the caller has read it already (None: open `db` to read it)."""
    import shutil

    from ..store.workspace import open_workspace

    if periodic is None:
        con = open_workspace(db, read_only=True)
        try:
            periodic = _periodic_ranks(con)
        finally:
            con.close()
    if not periodic:
        return db
    out = Path(tmp) / f"{side}-capture-windows.duckdb"
    shutil.copyfile(db, out)
    if Path(str(db) + ".wal").is_file():
        shutil.copyfile(str(db) + ".wal", str(out) + ".wal")
    con = open_workspace(out, analyse=False)
    try:
        con.execute(SQL["periodic_steps_off"])
    finally:
        con.close()
    open_workspace(out).close()  # recomputes the steps (and what depends on them) without them
    notes.append(
        f"{side}: the steps of {periodic} rank(s) came from a periodic kernel (--periodic-steps); compared "
        "per capture window instead (two captures may repeat different kernels)"
    )
    return out


@contextmanager
def workspaces(
    before: str | Path, after: str | Path, jobs: tuple[int | None, int | None] = (None, None)
) -> Iterator[tuple[Path, Path, list[str]]]:
    """Workspace paths for both inputs; trace folders/files are ingested into temporary ones.
    An input holding several jobs becomes one job's (`jobs`: before's, after's; see _one_job).
    Every path yielded has been opened with open_workspace, so its stored results are current."""
    from ..ingest.run import ingest

    notes: list[str] = []
    seen: dict[tuple[Path, int | None], Path] = {}
    made: list[str] = []
    with tempfile.TemporaryDirectory(prefix="nsight-compare-") as tmp:
        out = []
        for side, given, job in zip(SIDES, (before, after), jobs):
            path = Path(given)
            if not path.exists():
                raise UserError(
                    f"{side} input {path} does not exist (give a workspace .duckdb or a trace folder)"
                )
            if is_workspace(path):
                key = (path.resolve(), job)
                if key not in seen:  # the same workspace on both sides: opened (and refreshed) once
                    start = len(notes)
                    db, periodic = _one_job(path, job, side, tmp, notes)
                    seen[key] = _without_periodic(db, side, tmp, notes, periodic)
                    made = notes[start:]  # why a temporary workspace was made (its job, its steps)
                elif made:  # the same job's temporary workspace, made once: its notes name this side too
                    notes += [
                        side + n.removeprefix("before").replace("--before-", f"--{side}-") for n in made
                    ]
                out.append(seen[key])
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
            one, periodic = _one_job(db, job, side, tmp, notes)
            out.append(_without_periodic(one, side, tmp, notes, periodic))
        yield out[0], out[1], notes


def _total(values: Any) -> float:
    """The sum of the values that are not None or NaN, added as numpy adds an array (pairwise, as
    a DataFrame column's sum did): a float total has the same last digit as before."""
    return float(np.nansum(np.asarray([np.nan if v is None else v for v in values], dtype=float)))


def _side_views(con: duckdb.DuckDBPyConnection, cat: str, side: str) -> None:
    """Temp views {side}_tp / _src / _win / _imb / _rr over the stored results of the
    workspace attached as `cat`: the names compare's SQL reads for either side.

    Views, not copies: the results are stored tables (time_partition, steps, imbalance,
    rank_rollup), read in place like every other command reads them; a workspace against
    itself gives both sides the same views.
    """
    views = {
        "tp": SQL.sql("side_stored_result", table=f"{cat}.time_partition"),
        "src": SQL.sql("side_step_sources", steps=f"{cat}.steps"),
        "win": SQL.sql("side_step_spans", steps=f"{cat}.steps"),
        "imb": SQL.sql("side_stored_result", table=f"{cat}.imbalance"),
        "rr": SQL.sql("side_stored_result", table=f"{cat}.rank_rollup"),
    }
    try:
        for name, sql in views.items():
            con.execute(SQL.sql("side_view", view=f"{side}_{name}", select=sql))
    except duckdb.CatalogException as exc:
        raise UserError(
            f"the {side} workspace lacks a table compare needs ({str(exc).splitlines()[0]}); re-run ingest"
        ) from None


def _findings(con: duckdb.DuckDBPyConnection, cat: str) -> tuple[dict[str, Any] | None, str | None]:
    """diagnose() of one side, reduced to what a diff needs, with the thresholds and mean step it
    used (to place an absent finding's magnitude); None when diagnose is unavailable."""
    try:
        from ..diagnose import diagnose
    except ImportError:
        return None, "findings: diagnose is not available in this installation"
    con.execute(SQL.sql("use_catalog", catalog=cat))
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
    failed = found.job["rule_errors"]  # the other rules' findings stand; these are said
    return {
        "findings": rows,
        "thresholds": dict(found.thresholds),
        "mean_step_ns": found.job["mean_step_ns"],
    }, ("findings: rule failed: " + "; ".join(failed) if failed else None)


def _mfu(con: duckdb.DuckDBPyConnection, cat: str, model_flops_per_step: float | None) -> dict[str, Any]:
    """MFU/HFU of one side when known (MFU needs the model FLOPs, HFU Nsight Compute data)."""
    try:
        from ..mfu import hfu_mfu_summary
    except ImportError:
        return {"mfu": None, "hfu": None, "coverage_pct": None, "note": "mfu module not available"}
    con.execute(SQL.sql("use_catalog", catalog=cat))
    try:
        s = hfu_mfu_summary(con, model_flops_per_step=model_flops_per_step, detail=False)  # totals only
    except (duckdb.Error, UserError, ValueError) as exc:
        return {"mfu": None, "hfu": None, "coverage_pct": None, "note": str(exc).splitlines()[0]}
    return {
        "mfu": s.get("mfu"),
        "hfu": s.get("hfu"),
        "coverage_pct": s.get("coverage_pct"),
        "windows": s.get("windows"),
        "note": None,
    }
