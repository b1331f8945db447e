"""Which source module may read a file, decided without importing the module; and the optional
hooks of the source interface (sources/base.py), called for every source that defines them.

Why: the PyTorch-profiler and Nsight Compute readers import pyarrow, ijson and pandas (0.4 s
and 0.25 s); an ingest of nsys exports alone should not pay for them. A file's name (and, for
Nsight Compute reports, its first four bytes) says which readers to ask; each reader's own
`sniff` still decides. The orchestration (discovery, ingest, landing) reaches a reader's other
hooks (folder inputs, inputs read beside other inputs' ranks) only through the functions below,
never by a reader's name: a hook is asked of the readers of the inputs at hand, or, before
there are any, of the readers this module lists as having it (FOLDER_READERS, BESIDE_READERS),
which it imports only then.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

NSYS_SUFFIXES = (".sqlite", ".sqlite3")
KINETO_SUFFIXES = (".json", ".json.gz")
NCU_TEXT_SUFFIXES = (".csv", ".txt", ".log", "")
NCU_MAGIC = b"NVR\x00"
RECIPE_SUFFIXES = (".zip",)  # nsys recipe output folders (directories) or zips of them
# DCGM scrapes (.prom/.txt/...), Prometheus query JSON and dcgmi dmon tables; its sniff reads 64 KiB
DCGM_SUFFIXES = (".prom", ".txt", ".log", ".metrics", ".json", ".dmon", "")
ORDER = ("nsys_recipe", "nsys_sqlite", "dcgm", "kineto", "ncu")  # tried in this order
# Readers whose inputs may be folders: their `sniff` answers for folders too, and a folder one of
# them claims is one input (walk). No other reader is asked about a folder.
FOLDER_READERS = ("nsys_recipe",)
# Readers that may read an input beside other inputs' ranks: their RANK_TABLES_OWNED_BY_FILE are
# asked when a file is deleted (no input at hand); their `attach`, `resolve` and `unmatched_hint`
# are called as any reader's, when it reads one of the inputs.
BESIDE_READERS = ("nsys_recipe",)


def _may_read(name: str, path: Path) -> bool:
    lower = path.name.lower()
    if path.is_dir():  # only the folder readers read folders
        return name in FOLDER_READERS
    if name == "nsys_recipe":
        return path.suffix.lower() in RECIPE_SUFFIXES
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


# ---------------------------------------------------------------------------- folder inputs


def input_folder(path: Path) -> bool:
    """Whether `path` is a folder that is one input: a folder reader's `sniff` claims it (a path
    that cannot be looked at is not one)."""
    try:
        return path.is_dir() and any(module(name).sniff(path) for name in FOLDER_READERS)
    except OSError:
        return False


def walk(root: Path) -> list[Path]:
    """Every file below the folder `root` (as `rglob`), except that a folder that is one input
    (`input_folder`) is one entry and its own files are not listed (its reader reads them, or
    counts them as not read). An input folder inside another belongs to the outer one (a recipe
    folder inside an nsys-jax archive)."""
    if input_folder(root):
        return [root]
    entries = list(root.rglob("*"))
    folders = sorted((p for p in entries if input_folder(p)), key=lambda p: len(p.parts))
    outer: list[Path] = []
    for folder in folders:
        if not any(o in folder.parents for o in outer):
            outer.append(folder)
    inside = set(outer)
    # every entry but real folders: links (dangling ones too) and named pipes, sockets and
    # devices are listed, for the ingest to report (a FIFO is never opened: ingest/inputs._special_file)
    files = [
        p for p in entries if (p.is_symlink() or not p.is_dir()) and not any(q in inside for q in p.parents)
    ]
    return files + outer


def input_size(path: Path, source: ModuleType | None = None) -> int:
    """Bytes of an input (the `files` row, the workers' batches): its reader's `input_size` when
    it has one (a folder input: its files' total), else the file's size. Without `source`, a
    folder is measured by the folder readers."""
    readers = [source] if source is not None else [module(n) for n in FOLDER_READERS] if path.is_dir() else []
    for reader in readers:
        size = getattr(reader, "input_size", None)
        if size is not None:
            return size(path)
    return path.stat().st_size


# ---------------------------------------------------------------------------- beside other inputs


def _readers(ready: Sequence[Any], hook: str) -> list[ModuleType]:
    """The source modules of the candidates `ready` that define `hook`, each once, in ORDER
    (imported already: they read those inputs)."""
    found = dict.fromkeys(c.source for c in ready)
    rank = {f"{__package__}.{name}": i for i, name in enumerate(ORDER)}
    return sorted(
        (m for m in found if hasattr(m, hook)), key=lambda m: (rank.get(m.__name__, len(ORDER)), m.__name__)
    )


def attach(con: Any, ready: Sequence[Any]) -> None:
    """Before the ranks are numbered: each reader of `ready` that reads inputs beside other
    inputs' ranks (its `attach`) takes the ones it can (they then have no processes of their own)."""
    for reader in _readers(ready, "attach"):
        reader.attach(con, ready)


def resolve(ready: Sequence[Any]) -> None:
    """After the ranks are numbered: the inputs `attach` took learn the ranks they sit beside."""
    for reader in _readers(ready, "resolve"):
        reader.resolve(ready)


def unmatched_hint(ready: Sequence[Any]) -> str:
    """Why an input of `ready` that could have been read beside others was not (its reader's
    `unmatched_hint`), or '' when there is none."""
    for reader in _readers(ready, "unmatched_hint"):
        hint = reader.unmatched_hint(ready)
        if hint:
            return hint
    return ""


def rank_tables_owned_by_file() -> frozenset[str]:
    """The canonical tables keyed by rank whose rows belong to the file that wrote them (their
    `file_id`), not to the rank's own file: rows read beside other inputs' ranks. Deleting a
    file's ranks removes only its own rows of these."""
    return frozenset(
        table for name in BESIDE_READERS for table in getattr(module(name), "RANK_TABLES_OWNED_BY_FILE", ())
    )
