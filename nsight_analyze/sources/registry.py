"""Which source module may read a file, decided without importing the module.

Why: the PyTorch-profiler and Nsight Compute readers import pyarrow, ijson and pandas (0.4 s
and 0.25 s); an ingest of nsys exports alone should not pay for them. A file's name (and, for
Nsight Compute reports, its first four bytes) says which readers to ask; each reader's own
`sniff` still decides.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

NSYS_SUFFIXES = (".sqlite", ".sqlite3")
KINETO_SUFFIXES = (".json", ".json.gz")
NCU_TEXT_SUFFIXES = (".csv", ".txt", ".log", "")
NCU_MAGIC = b"NVR\x00"
RECIPE_SUFFIXES = (".zip",)  # nsys recipe output folders (directories) or zips of them
# DCGM scrapes (.prom/.txt/...), Prometheus query JSON and dcgmi dmon tables; its sniff reads 64 KiB
DCGM_SUFFIXES = (".prom", ".txt", ".log", ".metrics", ".json", ".dmon", "")
ORDER = ("nsys_recipe", "nsys_sqlite", "dcgm", "kineto", "ncu")  # tried in this order


def _may_read(name: str, path: Path) -> bool:
    lower = path.name.lower()
    if name == "nsys_recipe":
        return path.suffix.lower() in RECIPE_SUFFIXES or path.is_dir()
    if path.is_dir():  # only recipe outputs are folders
        return False
    if name == "nsys_sqlite":
        return path.suffix.lower() in NSYS_SUFFIXES
    if name == "kineto":
        return lower.endswith(KINETO_SUFFIXES)
    if name == "dcgm":
        return path.suffix.lower() in DCGM_SUFFIXES
    if path.suffix.lower() in (".ncu-rep", *NCU_TEXT_SUFFIXES):
        return True
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == NCU_MAGIC
    except OSError:
        return False


def module(name: str) -> ModuleType:
    return importlib.import_module(f"{__package__}.{name}")


def source_for(path: Path) -> ModuleType | None:
    """The first source module whose `sniff` claims the file (only plausible ones are imported)."""
    for name in ORDER:
        if _may_read(name, path) and module(name).sniff(path):
            return module(name)
    return None
