"""Ingest a folder of per-rank traces into one workspace, one transaction per file.

Order of work: discover files -> export .nsys-rep with the nsys CLI when present ->
probe every file (cheap metadata) -> number the ranks across all files -> load each
file in its own transaction -> classify kernels -> align clocks. A file that fails is
rolled back and reported in one line; the others still load. Re-ingesting the same
content is a no-op (sha256), so an interrupted ingest is simply run again.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import duckdb

from . import analysis, classify
from .errors import UserError, WorkspaceBusy
from .sources import registry
from .sources.base import BadInput, Probe
from .workspace import open_workspace

NSYS_REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
WORKSPACE_SUFFIXES = (".duckdb", ".duckdb.wal")
MAX_FILENAME_RANK = 100_000
INGEST_MEMORY_LIMIT = "512MB"


@dataclass
class FileOutcome:
    path: Path
    status: str  # ok | unchanged | failed | skipped | ignored
    message: str = ""
    file_id: int | None = None
    ranks: list[int] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass
class IngestReport:
    db: Path
    outcomes: list[FileOutcome] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def by_status(self, status: str) -> list[FileOutcome]:
        return [o for o in self.outcomes if o.status == status]

    @property
    def failed(self) -> bool:
        return bool(self.by_status("failed"))


@dataclass
class _Candidate:
    path: Path  # what the user has (the .nsys-rep for exported reports)
    readable: Path  # what the source reads (the exported .sqlite for .nsys-rep)
    source: ModuleType
    sha256: str = ""
    probe: Probe | None = None
    file_id: int | None = None
    ranks: dict[int, int] = field(default_factory=dict)
    rank_sources: dict[int, str] = field(default_factory=dict)
    job_ranks: dict[int, int] = field(default_factory=dict)  # Process.key -> rank within its job
    replaces: list[int] = field(default_factory=list)  # file_ids this file replaces


def natural_key(path: Path) -> list:
    """rank2 before rank10."""
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", str(path))]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def discover(inputs: Iterable[Path], db: Path) -> list[Path]:
    """Every file below the inputs, naturally sorted; never the workspace or its export cache."""
    files: list[Path] = []
    for item in inputs:
        if not item.exists():
            raise UserError(f"{item}: no such file or directory")
        if item.is_dir():
            files.extend(p for p in item.rglob("*") if p.is_file() or p.is_symlink())  # dangling: reported
        else:
            files.append(item)
    workspace = {db.resolve(), Path(f"{db.resolve()}.wal")}
    exports = export_cache(db).resolve()
    keep = [
        p
        for p in files
        if p.resolve() not in workspace
        and exports not in p.resolve().parents
        and not p.name.endswith(WORKSPACE_SUFFIXES)
    ]
    return sorted(keep, key=natural_key)


def export_cache(db: Path) -> Path:
    return db.with_name(db.name + ".exports")


def export_nsys_report(report: Path, db: Path, sha: str) -> Path:
    """Export a .nsys-rep/.qdrep with the nsys CLI into a cache beside the workspace."""
    out = export_cache(db) / f"{report.stem}-{sha[:12]}.sqlite"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".partial.sqlite")
    cmd = [
        "nsys",
        "export",
        "--type",
        "sqlite",
        "--force-overwrite",
        "true",
        "--output",
        str(tmp),
        str(report),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0 or not tmp.exists():
        last = (proc.stderr or proc.stdout).strip().splitlines()
        raise BadInput(f"nsys export failed ({last[-1] if last else 'exit ' + str(proc.returncode)})")
    tmp.rename(out)
    return out


def _classify_candidates(paths: list[Path], report: IngestReport) -> list[_Candidate]:
    candidates: list[_Candidate] = []
    reports = [p for p in paths if p.suffix.lower() in NSYS_REPORT_SUFFIXES]
    nsys_cli = shutil.which("nsys")
    if reports and not nsys_cli:
        report.notes.append(
            f"nsys CLI not found on PATH: {len(reports)} .nsys-rep/.qdrep file(s) skipped "
            "(export them with `nsys export --type sqlite` or put nsys on PATH)"
        )
    for path in paths:
        if path.suffix.lower() in NSYS_REPORT_SUFFIXES:
            if not nsys_cli:
                report.outcomes.append(FileOutcome(path, "skipped", "nsys CLI not on PATH"))
            else:
                candidates.append(_Candidate(path, path, registry.module("nsys_sqlite")))
            continue
        module = registry.source_for(path)
        if module is None:
            report.outcomes.append(FileOutcome(path, "ignored", "not a recognised trace format"))
        else:
            candidates.append(_Candidate(path, path, module))
    return candidates


def _prepare(cand: _Candidate, db: Path, hasher: ThreadPoolExecutor) -> None:
    """Hash, export and probe one file (runs in worker threads: no workspace access).

    An export is cached under its report's hash, so a report is hashed first; an SQLite
    file is hashed on the hasher thread while it is probed.
    """
    if cand.path.suffix.lower() in NSYS_REPORT_SUFFIXES:
        cand.sha256 = sha256_of(cand.path)
        cand.readable = export_nsys_report(cand.path, db, cand.sha256)
        cand.probe = cand.source.probe(cand.readable)
        return
    digest = hasher.submit(sha256_of, cand.path)
    try:
        cand.probe = cand.source.probe(cand.readable)
    finally:
        cand.sha256 = digest.result()


def assign_ranks(cands: list[_Candidate], taken: dict[int, str]) -> dict[int, str]:
    """Number the ranks of all new files; returns {candidate index: note} for files naming a rank
    number that another file already has.

    Order of evidence: a rank claimed inside the file (captured environment, MPI_RANKS,
    NCCL's init payload, Kineto distributedInfo: the source's probe decides); then digits
    in the file name, when every unclaimed file has a distinct number; then natural file
    order (rank2 before rank10), device order within a file. `rank` is unique in the
    workspace; `job_rank` is the number the evidence gave. A file claiming a number another
    file already has belongs to another job (queries/merge_jobs.sql): it keeps the number as
    its job_rank, and its ranks get the next free workspace numbers after everyone else's.
    """
    notes: dict[int, str] = {}
    owners = dict(taken)  # rank -> path
    later: list[_Candidate] = []
    for i, cand in enumerate(cands):
        claimed = [p for p in cand.probe.processes if p.claimed_rank is not None]
        for proc in claimed:
            cand.job_ranks[proc.key] = proc.claimed_rank
            cand.rank_sources[proc.key] = proc.rank_source or "claimed"
        clash = next((p for p in claimed if p.claimed_rank in owners), None)
        if clash is not None or len({p.claimed_rank for p in claimed}) < len(claimed):
            clash = clash or claimed[0]
            notes[i] = (
                f"rank {clash.claimed_rank} ({clash.rank_source}) is claimed by both "
                f"{owners.get(clash.claimed_rank, cand.path)} and {cand.path}: the second is another "
                "job's, its ranks are numbered after the others (ranks.job_rank keeps the claimed number)"
            )
            later.append(cand)
            continue
        for proc in claimed:
            owners[proc.claimed_rank] = str(cand.path)
            cand.ranks[proc.key] = proc.claimed_rank
    open_cands = [c for c in cands if not any(c is d for d in later)]
    unclaimed = [(c, p) for c in open_cands for p in c.probe.processes if p.key not in c.ranks]
    numbers = [_file_number(c.path) if len(c.probe.processes) == 1 else None for c, _ in unclaimed]
    by_name = (
        all(n is not None for n in numbers)
        and len(set(numbers)) == len(numbers)
        and not set(numbers) & set(owners)
    )
    next_free = 0
    for (cand, proc), number in zip(unclaimed, numbers):
        if by_name:
            rank, source = number, "filename"
        else:
            while next_free in owners:
                next_free += 1
            rank, source = next_free, "order"
        owners[rank] = str(cand.path)
        cand.ranks[proc.key] = rank
        cand.job_ranks[proc.key] = rank
        cand.rank_sources[proc.key] = source
    for cand in later:  # another job's ranks: the next free numbers, claimed numbers kept as job_rank
        for proc in cand.probe.processes:
            while next_free in owners:
                next_free += 1
            owners[next_free] = str(cand.path)
            cand.ranks[proc.key] = next_free
            cand.job_ranks.setdefault(proc.key, next_free)
            cand.rank_sources.setdefault(proc.key, "order")
    return notes


def _file_number(path: Path) -> int | None:
    """The rank a file name suggests: digits after 'rank', else its last number when it is
    small enough to be a rank (not a job id or a timestamp)."""
    tagged = re.search(r"rank[_\-.]?(\d+)", path.stem, re.I)
    if tagged:
        return int(tagged.group(1))
    groups = re.findall(r"\d+", path.stem)
    return int(groups[-1]) if groups and int(groups[-1]) < MAX_FILENAME_RANK else None


def ingest(
    inputs: list[Path] | Path,
    db: Path | str,
    jobs: int = 1,
    replace: bool = False,
    rules: Path | None = None,
    progress: Callable[[FileOutcome, int, int], None] | None = None,
    analysis_progress: Callable[[int, int], None] | None = None,
) -> IngestReport:
    """Load traces into the workspace; see the module docstring for the guarantees.

    `progress(outcome, done, total)` follows the files loaded; `analysis_progress(done, total)`
    the rank batches of the analysis computed after them (analysis.refresh).
    """
    inputs = [Path(p) for p in (inputs if isinstance(inputs, list) else [inputs])]
    db = Path(db)
    report = IngestReport(db=db)
    paths = discover(inputs, db)
    candidates = _classify_candidates(paths, report)
    if not candidates and not report.outcomes:
        raise UserError(f"no trace files found below {', '.join(map(str, inputs))}")
    sources = {c.source for c in candidates}
    hashes = {c.path: c for c in candidates}  # _ingest drops the failed ones from `candidates`
    existed = db.exists() or Path(f"{db}.wal").exists()
    exports_existed = export_cache(db).exists()
    first = candidates[0] if candidates else None
    if first is not None and hasattr(first.source, "prefetch") and first.readable == first.path:
        first.source.prefetch(first.path)  # the first file is parsed while all are prepared
    try:
        _ingest(candidates, db, report, jobs, rules, replace, progress, analysis_progress)
    except BaseException as exc:
        if not existed and not report.by_status("ok") and not isinstance(exc, WorkspaceBusy):
            _discard_new_workspace(db, exports_existed)
        raise
    finally:
        for source in sources:
            if hasattr(source, "cancel_prefetch"):
                source.cancel_prefetch()
    if not existed and not report.by_status("ok") and _discard_new_workspace(db, exports_existed):
        return report
    if existed or any(o.status in NOT_LOADED for o in report.outcomes):
        try:
            _record_not_loaded(db, report, hashes)
        except UserError as exc:  # what loaded stays loaded; only the list of the others is missing
            report.notes.append(f"files not loaded were not recorded in the workspace ({exc})")
    return report


NOT_LOADED = ("failed", "skipped", "ignored")


def _shown(path: Path) -> Path:
    """The absolute path a not-loaded file is recorded under: resolved like loaded files, except
    a dangling link, which keeps its own name (its missing target would say nothing)."""
    try:
        return path.resolve(strict=True)
    except OSError:
        return path.absolute()


def _discard_new_workspace(db: Path, exports_existed: bool) -> bool:
    """Remove a workspace this ingest created but loaded nothing into (a failed ingest leaves
    no file behind); False when it holds files after all (another process loaded them)."""
    try:
        con = open_workspace(db, read_only=True, analyse=False)
    except UserError:  # not there, busy, or not a workspace: nothing of ours to remove
        return not db.exists()
    try:
        if con.execute("SELECT count(*) FROM files").fetchone()[0]:
            return False
    finally:
        con.close()
    for path in (db, Path(f"{db}.wal")):
        path.unlink(missing_ok=True)
    if not exports_existed:
        shutil.rmtree(export_cache(db), ignore_errors=True)
    return True


def _record_not_loaded(db: Path, report: IngestReport, cands: dict[Path, _Candidate]) -> None:
    """One `files` row per file this ingest did not load (status failed, skipped or ignored, the
    reason in `warnings`), replacing earlier such rows of the paths seen, so `info` lists them."""
    seen = [str(p) for o in report.outcomes for p in {o.path.resolve(), o.path.absolute(), _shown(o.path)}]
    rows = [o for o in report.outcomes if o.status in NOT_LOADED]
    con = open_workspace(db, analyse=False)  # no GPU data changes: the stored results stay valid
    try:
        con.execute("BEGIN TRANSACTION")
        con.execute(
            "DELETE FROM files WHERE status <> 'ok' AND path IN (SELECT unnest(?::VARCHAR[]))", [seen]
        )
        next_id = con.execute("SELECT coalesce(max(file_id), 0) + 1 FROM files").fetchone()[0]
        for i, outcome in enumerate(rows):
            cand = cands.get(outcome.path)
            try:
                size = outcome.path.stat().st_size
            except OSError:
                size = None
            con.execute(
                "INSERT INTO files VALUES (?, ?, ?, ?, ?, NULL, NULL, now(), ?, ?, [])",
                [
                    next_id + i,
                    str(_shown(outcome.path)),
                    cand.sha256 if cand is not None else "",
                    size,
                    cand.probe.format if cand is not None and cand.probe is not None else None,
                    outcome.status,
                    [outcome.message] if outcome.message else [],
                ],
            )
        con.execute("COMMIT")
    finally:
        con.close()


def _ingest(
    candidates: list[_Candidate],
    db: Path,
    report: IngestReport,
    jobs: int,
    rules: Path | None,
    replace: bool,
    progress: Callable[[FileOutcome, int, int], None] | None,
    analysis_progress: Callable[[int, int], None] | None = None,
) -> IngestReport:
    # the pool is left (all files prepared) before the hasher its tasks submit to
    with ThreadPoolExecutor(max_workers=1) as hasher, ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        prepared = [pool.submit(_prepare_one, cand, db, hasher) for cand in candidates]
        try:
            con = open_workspace(db, analyse=False)  # meanwhile the files are hashed and probed
        except BaseException:
            for future in prepared:
                future.cancel()
            raise
    try:
        _drop_failed(candidates, [future.result() for future in prepared], report)
        # A file loads in one transaction; past this much memory DuckDB spills it to disk, so
        # peak memory does not grow with the size of the export.
        con.execute(f"SET memory_limit = '{INGEST_MEMORY_LIMIT}'")
        if rules is not None:
            classify.store_user_rules(con, rules)
        ready = _dedupe(con, candidates, replace, report)
        _refuse_mixed_formats(con, ready)
        _number_ranks(con, ready, report)
        to_load = [c for c in ready if c.file_id is not None]
        if to_load and all(getattr(c.source, "PARSES_IN_OWN_THREADS", False) for c in to_load):
            # the sources' parsers keep the cores busy; a second worker thread of this connection
            # only spins and contends with them (16 Kineto files: 8.7 s -> 7.7 s on 2 cores)
            con.execute("SET threads = 1")
        for done, cand in enumerate(to_load, 1):
            if done < len(to_load) and hasattr(to_load[done].source, "prefetch"):
                to_load[done].source.prefetch(to_load[done].readable)  # parsed while this one loads
            outcome = _load_one(con, cand)
            report.outcomes.append(outcome)
            if progress:
                progress(outcome, done, len(to_load))
        if report.by_status("ok"):
            _post_ingest(con, report, analysis_progress)
    finally:
        con.close()
    report.outcomes.sort(key=lambda o: natural_key(o.path))
    return report


def _prepare_one(cand: _Candidate, db: Path, hasher: ThreadPoolExecutor) -> str | None:
    """_prepare, with a bad file turned into its one-line reason."""
    try:
        _prepare(cand, db, hasher)
        return None
    except BadInput as exc:
        return str(exc)
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"


def _drop_failed(cands: list[_Candidate], errors: list[str | None], report: IngestReport) -> None:
    for cand, error in zip(list(cands), errors):
        if error:
            report.outcomes.append(FileOutcome(cand.path, "failed", error))
            cands.remove(cand)


def _dedupe(con: duckdb.DuckDBPyConnection, cands: list[_Candidate], replace: bool, report: IngestReport):
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
            "SELECT file_id FROM files WHERE sha256 = ? AND status = 'ok'", [cand.sha256]
        ).fetchall()
        same_path = con.execute(
            "SELECT file_id FROM files WHERE path = ? AND status = 'ok'", [str(cand.path.resolve())]
        ).fetchall()
        if same and not replace:
            report.outcomes.append(
                FileOutcome(cand.path, "unchanged", "already in the workspace (same content)")
            )
            continue
        cand.replaces = sorted({r[0] for r in same + same_path}) if replace else []
        if same_path and not replace and not same:
            report.outcomes.append(
                FileOutcome(cand.path, "failed", "content changed since last ingest (use --replace)")
            )
            continue
        ready.append(cand)
    return ready


def _refuse_mixed_formats(con: duckdb.DuckDBPyConnection, ready: list[_Candidate]) -> None:
    """One job, one profiler: nsys and Kineto timelines of the same ranks cannot be merged."""
    formats = {c.probe.format for c in ready if c.probe.processes}
    formats |= {
        f
        for (f,) in con.execute(
            "SELECT DISTINCT source_format FROM files JOIN ranks USING (file_id)"
        ).fetchall()
    }
    if len(formats) > 1:
        raise UserError(
            f"these traces mix formats ({', '.join(sorted(formats))}) for the ranks of one job; "
            "ingest each profiler's traces into its own workspace (--db)"
        )


def _number_ranks(con: duckdb.DuckDBPyConnection, ready: list[_Candidate], report: IngestReport) -> None:
    replaced = {fid for c in ready for fid in c.replaces}
    taken = {
        r: p
        for r, p, fid in con.execute(
            "SELECT r.rank, f.path, f.file_id FROM ranks r JOIN files f USING (file_id)"
        ).fetchall()
        if fid not in replaced
    }
    report.notes.extend(assign_ranks(ready, taken).values())
    next_id = con.execute("SELECT coalesce(max(file_id), 0) + 1 FROM files").fetchone()[0]
    for cand in ready:
        cand.file_id = next_id
        next_id += 1


def _load_one(con: duckdb.DuckDBPyConnection, cand: _Candidate) -> FileOutcome:
    started = time.perf_counter()
    probe = cand.probe
    con.execute("BEGIN TRANSACTION")
    try:
        for fid in cand.replaces:
            _delete_file(con, fid)
        result = cand.source.load(con, cand.readable, cand.file_id, cand.ranks, probe)
        _insert_ranks(con, cand)
        classify.classify_kernels(con)
        con.execute(
            "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?, now(), 'ok', ?, ?)",
            [
                cand.file_id,
                str(cand.path.resolve()),
                cand.sha256,
                cand.path.stat().st_size,
                probe.format,
                probe.version,
                probe.schema_version,
                result.warnings,
                result.skipped,
            ],
        )
        con.execute("COMMIT")
    except (BadInput, duckdb.Error) as exc:
        con.execute("ROLLBACK")
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return FileOutcome(cand.path, "failed", message, seconds=time.perf_counter() - started)
    except BaseException:
        con.execute("ROLLBACK")
        raise
    finally:
        if hasattr(cand.source, "release"):
            cand.source.release(con)
    warn = f"{len(result.warnings)} warning(s)" if result.warnings else ""
    return FileOutcome(
        cand.path,
        "ok",
        warn,
        cand.file_id,
        sorted(cand.ranks.values()),
        result.counts,
        time.perf_counter() - started,
    )


def _insert_ranks(con: duckdb.DuckDBPyConnection, cand: _Candidate) -> None:
    rows = []
    for proc in cand.probe.processes:
        rank = cand.ranks[proc.key]
        rows.append(
            (
                rank,
                cand.file_id,
                proc.pid,
                proc.key,
                proc.hostname,
                proc.device_id,
                proc.gpu_name,
                proc.session_start_utc_ns,
                None,
                cand.rank_sources[proc.key],
                proc.local_rank,
                proc.world_size,
                None,
                cand.job_ranks.get(proc.key, rank),
            )
        )
    if rows:  # job: set by the job step (analysis), from queries/merge_jobs.sql
        con.executemany(
            "INSERT INTO ranks (rank, file_id, pid, global_pid, hostname, device_id, gpu_name, "
            "session_start_utc_ns, clock_offset_ns, rank_source, local_rank, world_size, alignment_method, "
            "job_rank) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )


# What a file owns, keyed by its ranks or by its file_id (schema.sql and schema_*.sql).
RANK_TABLES = (
    "kernels",
    "memops",
    "cuda_api",
    "sync",
    "nvtx",
    "gpu_metrics",
    "threads",
    "gpus",
    "kineto_collectives",
    "kineto_gpu_annotations",
)
FILE_TABLES = ("env", "ncu_kernels", "ncu_metrics", "ncu_peaks", "ranks", "files")


def _delete_file(con: duckdb.DuckDBPyConnection, file_id: int) -> None:
    ranks = [r[0] for r in con.execute("SELECT rank FROM ranks WHERE file_id = ?", [file_id]).fetchall()]
    if ranks:
        for table in RANK_TABLES:
            con.execute(f"DELETE FROM {table} WHERE rank IN (SELECT unnest(?::INTEGER[]))", [ranks])
    for table in FILE_TABLES:
        con.execute(f"DELETE FROM {table} WHERE file_id = ?", [file_id])


def _post_ingest(
    con: duckdb.DuckDBPyConnection,
    report: IngestReport,
    progress: Callable[[int, int], None] | None = None,
) -> None:
    """Compute the stored results of the new and changed ranks, then the job's (clock
    alignment included: session start (UTC), refined from collectives)."""
    report.notes.extend(analysis.refresh(con, progress=progress))
