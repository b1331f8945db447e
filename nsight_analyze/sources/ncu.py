"""Nsight Compute results: `ncu --csv` (long details page or `--page raw` wide) and `.ncu-rep`.

Why this shape: HFU needs FLOPs the hardware executed, which only counters give, and
Nsight Compute is where those counters come from. Its exports are awkward (program
output before the header, quoted values with locale-dependent thousands separators,
`n/a`, unit prefixes, a units row in the raw page, rates instead of totals in some
reports), so this reader only normalises values and stores every metric as it was
measured (`ncu_metrics`); the FLOP arithmetic is SQL (queries/hfu_ncu_flops.sql) so it
is visible and testable. `.ncu-rep` files need NVIDIA's `ncu_report` module, an optional
extra (`pip install ncu-report`); without it they fail with one clear line.

The layouts are described in ../shared/docs/nsys-sqlite-schema.md §10.5-10.6. This module only
recognises the files; `ncu_load` (pandas) reads them, imported when one is loaded.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

from .base import BadInput, LoadResult, Probe

FORMAT = "ncu-csv"
REP_FORMAT = "ncu-rep"
REP_MAGIC = b"NVR\x00"
HEADER_SCAN_BYTES = 1 << 20

def sniff(path: Path) -> bool:
    """An .ncu-rep (suffix or magic NVR\\0), or a CSV/log whose header row is Nsight Compute's."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".ncu-rep":
        return True
    try:
        with open(path, "rb") as fh:
            if suffix not in (".csv", ".txt", ".log", ""):
                return fh.read(4) == REP_MAGIC
            head = fh.read(HEADER_SCAN_BYTES)
    except OSError:
        return False
    return head.startswith(REP_MAGIC) or header_offset(head) is not None


def header_offset(head: bytes) -> int | None:
    """Byte offset of the `"ID","Process ID",...` header line (program output may precede it)."""
    match = re.search(rb'(?m)^(\xef\xbb\xbf)?"ID","Process ID",.*"Kernel Name"', head)
    return None if match is None else match.start()


def probe(path: Path) -> Probe:
    """ncu files carry no ranks; the probe only checks that the file is readable as ncu output."""
    path = Path(path)
    if is_rep(path):
        return Probe(format=REP_FORMAT, processes=[], version=None)
    with open(path, "rb") as fh:
        head = fh.read(HEADER_SCAN_BYTES)
    if header_offset(head) is None:
        raise BadInput(f'{path.name}: no Nsight Compute CSV header (a line starting with "ID","Process ID")')
    return Probe(format=FORMAT, processes=[])


def is_rep(path: Path) -> bool:
    if path.suffix == ".ncu-rep":
        return True
    with open(path, "rb") as fh:
        return fh.read(4) == REP_MAGIC


def load(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    file_id: int,
    ranks: dict | None = None,
    probe_result: Probe | None = None,
) -> LoadResult:
    """ncu files carry no ranks: only the path and file id matter."""
    from . import ncu_load  # pandas costs 0.2 s: paid only when an ncu file is loaded

    return ncu_load.load_file(con, path, file_id)
