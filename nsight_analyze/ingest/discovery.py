"""Which inputs a folder holds, and which rank each process in them is.

Why apart from the ingest: this is the part a user reasons about when ranks come out wrong
(file names, claimed ranks, two jobs in one folder); the ingest only acts on its answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from ..errors import UserError
from ..sources import registry
from ..sources.base import Probe

WORKSPACE_SUFFIXES = (".duckdb", ".duckdb.wal")
MAX_FILENAME_RANK = 100_000


@dataclass
class Candidate:
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
    labels: list[tuple[str, str, str]] = field(default_factory=list)  # run_labels: (key, value, source)


def natural_key(path: Path) -> list:
    """rank2 before rank10."""
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", str(path))]


def export_cache(db: Path) -> Path:
    """The folder beside the workspace that holds the SQLite exports of its .nsys-rep reports
    (rank_task writes them): never an input itself."""
    return db.with_name(db.name + ".exports")


def discover(inputs: Iterable[Path], db: Path) -> list[Path]:
    """Every file below the inputs, naturally sorted; never the workspace or its export cache."""
    files: list[Path] = []
    for item in inputs:
        if not item.exists():
            raise UserError(f"{item}: no such file or directory")
        if item.is_dir():
            # every file (dangling links: reported); a folder a reader reads whole is one input
            files.extend(registry.walk(item))
        else:
            files.append(item)
    workspace = {db.resolve(), Path(f"{db.resolve()}.wal")}
    exports = export_cache(db).resolve()
    keep = [
        p
        for p, real in ((p, p.resolve()) for p in files)
        if real not in workspace and exports not in real.parents and not p.name.endswith(WORKSPACE_SUFFIXES)
    ]
    return sorted(keep, key=natural_key)


def assign_ranks(cands: list[Candidate], taken: dict[int, str]) -> dict[int, str]:
    """Number the ranks of all new files; returns {candidate index: note} for files naming a rank
    number that another file already has.

    Order of evidence: a rank claimed inside the file (captured environment, MPI_RANKS,
    NCCL's init payload, Kineto distributedInfo: the source's probe decides); then a rank the
    file name states by a recognised pattern (NAME_RANK_PATTERNS: rank3, _r3_, worker3, ...,
    never a bare number), when every unclaimed file has a distinct one; then natural file
    order (rank2 before rank10), device order within a file. `rank` is unique in the
    workspace; `job_rank` is the number the evidence gave. A file claiming a number another
    file already has belongs to another job (queries/job/merge_jobs.sql): it keeps the number as
    its job_rank, and its ranks get the next free workspace numbers after everyone else's.
    """
    notes: dict[int, str] = {}
    owners = dict(taken)  # rank -> path
    later: list[Candidate] = []
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


# How a file name says its rank, strongest first. Only these: a bare number in a name is as often a
# version (trace_ROCm6_2_x, cuda12_4, v2, Qwen1.5-0.5B), a date, a pid or a job id, and taking one
# for the rank made a lone ROCm 6.2 trace rank 2 "with ranks 0-1 missing".
NAME_RANK_PATTERNS = (
    # rank0, rank_3, rank-3, rank.3, RANK=3, node1_rank3, sampled_rank-1 (not local_rank3: per node)
    re.compile(r"(?<![a-z])(?<!local_)(?<!local-)(?<!local)rank[_\-.=]?(\d+)", re.I),
    # r3 / r003 as a token of its own: _r3_, trace.r003.json
    re.compile(r"(?<![^_\-.\s])r(\d+)(?![^_\-.\s])", re.I),
    # worker3, proc3, process_3 (the per-process files of a launcher)
    re.compile(r"(?<![a-z])(?:worker|proc|process)[_\-.=]?(\d+)", re.I),
)


def _file_number(path: Path) -> int | None:
    """The rank a file name states by a recognised pattern (NAME_RANK_PATTERNS, the first that
    matches), else None; None too when the pattern gives two different numbers (rank0_vs_rank1)
    or one too large to be a rank."""
    for pattern in NAME_RANK_PATTERNS:
        numbers = {int(m) for m in pattern.findall(path.stem)}
        if numbers:
            number = numbers.pop()
            return number if not numbers and number < MAX_FILENAME_RANK else None
    return None
