"""What every input format provides to the ingest: a cheap probe, then a load.

The ingest first probes every file (which processes, i.e. would-be ranks, it holds and
what rank each claims), assigns rank numbers across all files, then loads each file in
its own transaction. A source module defines:

    FORMAT: str                      # e.g. "nsys-sqlite", "kineto-json", "ncu-csv"
    def sniff(path: Path) -> bool    # cheap: is this file of my format?
    def probe(path: Path) -> Probe   # metadata only; raises BadInput with one clear line
    def load(con, path: Path, file_id: int, ranks: dict[int, int], probe: Probe) -> LoadResult
        # inserts canonical rows inside the caller's open transaction; `ranks` maps
        # Process.key -> assigned rank number
    def release(con) -> None         # optional: undo what load() could not undo inside the
                                     # transaction (nsys: DETACH the export); called after it
    def prefetch(path: Path) -> None # optional: start reading a file whose load() follows soon
    def cancel_prefetch() -> None    # optional: drop what prefetch() read and no load() took
    PARSES_IN_OWN_THREADS: bool      # optional: its parsers keep the cores busy, so the
                                     # ingest's connection runs on one thread
    def input_size(path: Path) -> int  # optional: bytes of an input (default: the file's size)

Optional capabilities the orchestration reaches only through `registry` (no module outside
sources/ names a reader), for every source that has them:

    Folder inputs (the source is listed in registry.FOLDER_READERS): its `sniff` answers for
    folders too, and a folder it claims is one input (registry.walk lists it, not its files);
    it defines `input_size` (a folder's files' total).
    Inputs read beside other inputs' ranks (listed in registry.BESIDE_READERS):
    def attach(con, ready: list[Candidate]) -> None   # before the ranks are numbered: take the
        # inputs of `ready` it reads beside others' ranks (their probe then has no processes)
    def resolve(ready: list[Candidate]) -> None        # after: learn those ranks' numbers
    def unmatched_hint(ready: list[Candidate]) -> str  # why one was not taken ('' if none):
        # the refusal of mixed formats says it
    RANK_TABLES_OWNED_BY_FILE: tuple[str, ...]  # tables under others' ranks whose rows stay its
        # own (file_id): deleting a file's ranks removes only that file's rows of them
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class BadInput(Exception):
    """The file cannot be ingested; the message is one line saying why."""


@dataclass
class Process:
    """One would-be rank found in a file: one process on one GPU."""

    key: int  # source-specific identity inside the file (nsys: globalPid; kineto: pid)
    pid: int | None = None
    device_id: int | None = None
    claimed_rank: int | None = None  # from a trustworthy source inside the file
    rank_source: str | None = None  # e.g. "env:RANK", "mpi", "kineto:distributedInfo"
    hostname: str | None = None
    local_rank: int | None = None
    world_size: int | None = None
    gpu_name: str | None = None
    session_start_utc_ns: int | None = None


@dataclass
class Probe:
    format: str
    processes: list[Process]  # empty for formats that carry no ranks (Nsight Compute)
    version: str | None = None  # tool version that wrote the file
    schema_version: str | None = None
    warnings: list[str] = field(default_factory=list)
    context: Any = None  # whatever the source wants to hand from probe() to load()


# The start of a file warning that the trace's times are corrupt for some rows: `summary` repeats
# such warnings beside the partition they distort (the others stay in `info`).
CORRUPT_TIMING = "corrupt timing: "


@dataclass
class LoadResult:
    warnings: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "WHAT: N rows (why)"
    counts: dict[str, int] = field(default_factory=dict)  # canonical table -> rows inserted


def peak_rows(file_id: int, peak: Any) -> list[tuple]:
    """`ncu_peaks` rows (one per precision) of the GPU a hardware-counter file was captured on.

    Why here: Nsight Compute files and Kineto traces with CUPTI range-profiler counters both
    place their kernels on a roofline (queries/hfu/roofline.sql), which joins these rows by file_id."""
    from ..gpus import table as gpu_table

    bw = None if peak.mem_bw_gbs is None else peak.mem_bw_gbs * 1e9
    return [
        (
            file_id,
            p,
            None if peak.tflops.get(p) is None else peak.tflops[p] * 1e12,
            bw,
            peak.source,
            peak.reason,
        )
        for p in gpu_table.PRECISIONS
    ]
