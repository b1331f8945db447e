"""Which of an ingest's files are read, and which are not and why; which of those read are new.

Why its own module: before anything is loaded, the files found (discovery.discover) are sorted
into those a source reads and those skipped (an .nsys-rep whose export lies beside it, a report
without nsys on PATH), ignored (a pipe, a socket, an unrecognised format) or failed (a path DuckDB
cannot open), each with its one-line reason; once prepared, those of content the workspace holds
already are left out (sha256), a change of traced formats is refused, and the new files are
numbered. run.py runs these steps in this order; nothing here loads a row.
"""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import duckdb

from .. import run_labels
from ..errors import UserError
from ..sources import registry
from ..store.duck import sql_string, utf8_path
from ..store.query_layer import statements
from ..store.workspace import open_workspace
from .discovery import Candidate, assign_ranks
from .landing import FileOutcome
from .rank_task import NSYS_REPORT_SUFFIXES
from .report import IngestReport

SQL = statements("ingest/inputs")


def _special_file(path: Path) -> str | None:
    """What `path` is when it is neither a regular file nor a folder (nor a dangling link, which
    the readers report): a named pipe, a socket or a device. Why: opening a FIFO blocks until a
    writer comes, so reading one to sniff its format hung the ingest."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return None


NOT_UTF8 = "its path is not valid UTF-8, which DuckDB cannot open: rename it, or link it under a UTF-8 name"


UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _unrecognised(path: Path) -> str:
    """Why a file is not read. UTF-16 text is said as such: a CSV or scrape redirected to a file
    by Windows PowerShell is UTF-16, which no reader here takes."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(2)
    except OSError:
        head = b""
    if head in UTF16_BOMS:
        return "UTF-16 text, not a recognised trace format: convert it to UTF-8 (iconv -f UTF-16 -t UTF-8)"
    return "not a recognised trace format"


def _exports_beside(paths: list[Path], nsys_cli: bool, loaded: set[str], replace: bool) -> dict[Path, str]:
    """{path: why it is skipped} for each .nsys-rep/.qdrep whose .sqlite export lies beside it
    (same folder and stem, as `nsys stats` and `nsys export` leave it): one of the two is read.

    Why: reading both numbered the same ranks twice, and the second file's became a phantom
    second job. A report the workspace holds (`loaded`: resolved paths) stays, unless
    `replace`; otherwise the export is read, unless it is older than its report and nsys can
    export the report again (a stale export of an earlier capture under the same name)."""
    exports = {(p.parent, p.stem): p for p in paths if p.suffix.lower() == ".sqlite"}
    skip: dict[Path, str] = {}
    for rep in (p for p in paths if p.suffix.lower() in NSYS_REPORT_SUFFIXES):
        export = exports.get((rep.parent, rep.stem))
        if export is None:
            continue
        if str(rep.resolve()) in loaded and not replace:
            skip[export] = (
                f"the export of {rep.name}, which the workspace holds already (--replace reads the "
                "export in its place)"
            )
            continue
        try:
            stale = rep.stat().st_mtime > export.stat().st_mtime + 1
        except OSError:
            stale = False
        if stale and nsys_cli:
            skip[export] = f"older than its report {rep.name} beside it, which is exported and read instead"
        else:
            skip[rep] = f"its export {export.name} beside it is read instead" + (
                " (older than the report; nsys, not on PATH, cannot export it again)" if stale else ""
            )
    return skip


def _loaded_files(db: Path) -> set[str]:
    """The paths of the files an existing workspace holds (status ok)."""
    if not db.exists():
        return set()
    con = open_workspace(db, read_only=True, analyse=False)
    try:
        return {p for (p,) in con.execute("SELECT path FROM files WHERE status = 'ok'").fetchall()}
    finally:
        con.close()


def classify_candidates(paths: list[Path], report: IngestReport, db: Path, replace: bool) -> list[Candidate]:
    """The files a source reads, as Candidates; every other file's outcome (skipped, ignored or
    failed, with its reason) goes into the report."""
    candidates: list[Candidate] = []
    nsys_cli = shutil.which("nsys")
    pairs = any(p.suffix.lower() in NSYS_REPORT_SUFFIXES for p in paths)  # read the workspace only then
    beside = _exports_beside(paths, bool(nsys_cli), _loaded_files(db) if pairs else set(), replace)
    reports = [p for p in paths if p.suffix.lower() in NSYS_REPORT_SUFFIXES and p not in beside]
    if reports and not nsys_cli:
        report.notes.append(
            f"nsys CLI not found on PATH: {len(reports)} .nsys-rep/.qdrep file(s) skipped "
            "(export them with `nsys export --type sqlite` or put nsys on PATH)"
        )
    for path in paths:
        special = _special_file(path)
        if special:
            report.outcomes.append(FileOutcome(path, "ignored", f"{special}, not a regular file: not read"))
            continue
        if path in beside:
            report.outcomes.append(FileOutcome(path, "skipped", beside[path]))
            continue
        if path.suffix.lower() in NSYS_REPORT_SUFFIXES:
            if not nsys_cli:
                report.outcomes.append(FileOutcome(path, "skipped", "nsys CLI not on PATH"))
            else:
                candidates.append(Candidate(path, path, registry.module("nsys_sqlite")))
            continue
        if path.name in run_labels.LABEL_FILES:  # a run's labels, read with its files (labels_for)
            continue
        module = registry.source_for(path)
        if module is None:
            report.outcomes.append(FileOutcome(path, "ignored", _unrecognised(path)))
        elif not utf8_path(path.absolute()):
            report.outcomes.append(FileOutcome(path, "failed", NOT_UTF8))
        else:
            candidates.append(Candidate(path, path, module))
    return candidates


def dedupe(con: duckdb.DuckDBPyConnection, cands: list[Candidate], replace: bool, report: IngestReport):
    """The prepared files to load: those of content (sha256) or a path the workspace holds are
    unchanged, skipped or failed (each said in the report), unless `replace`, when they replace it."""
    ready = []
    seen: dict[str, Path] = {}
    for cand in cands:
        if cand.sha256 in seen:
            report.outcomes.append(
                FileOutcome(cand.path, "unchanged", f"same content as {seen[cand.sha256]}")
            )
            continue
        seen[cand.sha256] = cand.path
        # rows of files that were not loaded (status failed, skipped, ignored) are no content
        same = con.execute(
            f"SELECT file_id FROM files WHERE sha256 = {sql_string(cand.sha256)} AND status = 'ok'"
        ).fetchall()
        same_path = con.execute(
            f"SELECT file_id FROM files WHERE path = {sql_string(str(cand.path.resolve()))} AND status = 'ok'"
        ).fetchall()
        if same and not replace:
            report.outcomes.append(
                FileOutcome(cand.path, "unchanged", "already in the workspace (same content)")
            )
            continue
        loaded_report = _loaded_report_of(con, cand.path)
        if loaded_report and not replace:
            report.outcomes.append(
                FileOutcome(
                    cand.path,
                    "skipped",
                    f"the export of {loaded_report[0][1]}, which the workspace holds already "
                    "(--replace reads the export in its place)",
                )
            )
            continue
        cand.replaces = sorted({r[0] for r in same + same_path + loaded_report}) if replace else []
        if same_path and not replace and not same:
            report.outcomes.append(
                FileOutcome(cand.path, "failed", "content changed since last ingest (use --replace)")
            )
            continue
        ready.append(cand)
    return ready


def _loaded_report_of(con: duckdb.DuckDBPyConnection, path: Path) -> list[tuple[int, str]]:
    """(file_id, name) of the .nsys-rep/.qdrep beside the .sqlite `path` that the workspace holds.
    Why: `nsys stats` writes that export after the report was ingested; read as a new file it
    claimed the report's ranks again and became a phantom second job (_exports_beside covers a
    pair met in one ingest)."""
    if path.suffix.lower() != ".sqlite":
        return []
    base = path.resolve().with_suffix("")
    names = ", ".join(sql_string(f"{base}{suffix}") for suffix in NSYS_REPORT_SUFFIXES)
    rows = con.execute(
        f"SELECT file_id, path FROM files WHERE status = 'ok' AND path IN ({names})"
    ).fetchall()
    return [(fid, Path(p).name) for fid, p in rows]


def refuse_mixed_formats(con: duckdb.DuckDBPyConnection, ready: list[Candidate]) -> None:
    """One job, one profiler: nsys and Kineto timelines of the same ranks cannot be merged."""
    formats = {c.probe.format for c in ready if c.probe.processes}
    formats |= {f for (f,) in con.execute(SQL["loaded_formats"]).fetchall()}
    if len(formats) > 1:
        advice = registry.unmatched_hint(ready) or "ingest each profiler's traces into its own workspace"
        mixed = ", ".join(sorted(formats))
        raise UserError(f"these traces mix formats ({mixed}) for the ranks of one job; {advice} (--db)")


def number_ranks(con: duckdb.DuckDBPyConnection, ready: list[Candidate], report: IngestReport) -> None:
    """Rank numbers for the processes of `ready` beside those the workspace keeps (assign_ranks),
    and a new file_id for each file."""
    replaced = {fid for c in ready for fid in c.replaces}
    taken = {r: p for r, p, fid in con.execute(SQL["taken_ranks"]).fetchall() if fid not in replaced}
    report.notes.extend(assign_ranks(ready, taken).values())
    next_id = con.execute("SELECT coalesce(max(file_id), 0) + 1 FROM files").fetchone()[0]
    for cand in ready:
        cand.file_id = next_id
        next_id += 1
