"""What an ingest reports, and what it leaves in the workspace besides the files it loaded.

Why its own module: every step of an ingest (inputs.py's choice of files, workers.py's
preparing and mapping, run.py's loading) adds its files' outcomes to one `IngestReport`; and how
an ingest ends is decided here: each file it did not load gets a `files` row saying why (so `info`
lists it), and a workspace it created but loaded nothing into is removed (a failed ingest leaves
no file behind).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserError
from ..store.duck import path_text, sql_row, sql_value
from ..store.query_layer import statements
from ..store.workspace import open_workspace
from . import rank_store
from .discovery import Candidate
from .landing import FileOutcome
from .rank_task import export_cache

SQL = statements("ingest/report")


@dataclass
class IngestReport:
    """What an ingest did: each file's outcome, the notes for the user, the seconds per phase
    (`na.ingest` keeps it as `ws.ingest_report`; the command prints it)."""

    db: Path
    outcomes: list[FileOutcome] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # seconds spent: "prepare" (hash, export, probe), "load" (read or map the files and land
    # them), "analysis" (the stored results: rank-local ones not computed by workers, the job's),
    # of which "analysis_rank" (the rank-local step, or reading the workers' results) and
    # "analysis_job" (the job step)
    seconds: dict[str, float] = field(default_factory=dict)

    def by_status(self, status: str) -> list[FileOutcome]:
        return [o for o in self.outcomes if o.status == status]

    @property
    def failed(self) -> bool:
        return bool(self.by_status("failed"))


NOT_LOADED = ("failed", "skipped", "ignored")


def _shown(path: Path) -> Path:
    """The absolute path a not-loaded file is recorded under: resolved like loaded files, except
    a dangling link, which keeps its own name (its missing target would say nothing)."""
    try:
        return path.resolve(strict=True)
    except OSError:
        return path.absolute()


def discard_new_workspace(db: Path, exports_existed: bool, loaded_by_us: bool = False) -> bool:
    """Remove a workspace this ingest created but loaded nothing into (a failed ingest leaves
    no file behind); False when it holds files after all (another process loaded them), unless
    `loaded_by_us`: this ingest failed while it held the workspace, so the files are its own."""
    if loaded_by_us:
        _remove_workspace(db, exports_existed)
        return True
    try:
        con = open_workspace(db, read_only=True, analyse=False)
    except UserError:  # not there, busy, or not a workspace: nothing of ours to remove
        return not db.exists()
    try:
        if con.execute("SELECT count(*) FROM files").fetchone()[0]:
            return False
    finally:
        con.close()
    _remove_workspace(db, exports_existed)
    return True


def _remove_workspace(db: Path, exports_existed: bool) -> None:
    for path in (db, Path(f"{db}.wal")):
        path.unlink(missing_ok=True)
    if not exports_existed:
        shutil.rmtree(export_cache(db), ignore_errors=True)
    shutil.rmtree(rank_store.store_dir(db), ignore_errors=True)


def record_not_loaded(db: Path, report: IngestReport, cands: dict[Path, Candidate]) -> None:
    """One `files` row per file this ingest did not load (status failed, skipped or ignored, the
    reason in `warnings`), replacing earlier such rows of the paths seen, so `info` lists them."""
    shown = {o.path: _shown(o.path) for o in report.outcomes}  # resolved once: 1 s for 5,500 files
    seen = [
        path_text(p) for o in report.outcomes for p in {o.path.resolve(), o.path.absolute(), shown[o.path]}
    ]
    rows = [o for o in report.outcomes if o.status in NOT_LOADED]
    con = open_workspace(db, analyse=False)  # no GPU data changes: the stored results stay valid
    try:
        con.execute("BEGIN TRANSACTION")
        paths = f"{sql_value(seen)}::VARCHAR[]"
        con.execute(SQL.sql("forget_not_loaded", paths=paths))
        next_id = con.execute("SELECT coalesce(max(file_id), 0) + 1 FROM files").fetchone()[0]
        values = []
        for i, outcome in enumerate(rows):
            cand = cands.get(outcome.path)
            try:
                size = outcome.path.stat().st_size
            except OSError:
                size = None
            known = sql_row(
                (
                    next_id + i,
                    path_text(shown[outcome.path]),
                    cand.sha256 if cand is not None else "",
                    size,
                    cand.probe.format if cand is not None and cand.probe is not None else None,
                )
            )
            message = sql_value([outcome.message] if outcome.message else [])
            values.append(
                SQL.sql("not_loaded_row", known=known, status=sql_value(outcome.status), message=message)
            )
        # one statement per 1,000 rows, not per file: a folder of 5,500 logs beside the traces
        # took 3.9 s in 5,500 INSERTs
        for start in range(0, len(values), 1000):
            con.execute(SQL.sql("insert_files", rows=", ".join(values[start : start + 1000])))
        con.execute("COMMIT")
    finally:
        con.close()
