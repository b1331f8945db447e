"""One nsys recipe input's files: the folder or zip, its recipe outputs and the tables read.

Why a module of its own: nsys_recipe.py is the source (discovery, probe, load, and reading a
recipe output beside its reports); this is what it reads them with. `Bundle` lists and reads
the files of a folder or a zip alike; each `.nsys-analysis` file names one recipe output
(`Output`); the recipes nsight-analyze reads get their Parquet table (and files.parquet: which
report each recipe Rank is), the others the reason they are not read; nsys-jax's metadata files
give the GPU and the environment. `Context` is what the probe hands the load (and the ingest's
workers): the outputs, the processes and which files were read, so that every other file of the
input is counted as not read.
"""

from __future__ import annotations

import json
import re
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .base import BadInput

ANALYSIS_SUFFIX = ".nsys-analysis"
JAX_DEVICE_META = "device-metadata.parquet"
JAX_SYSTEM_META = "system-metadata.parquet"

# nvtx_gpu_proj_trace/trace.parquet, as the recipe writes it (nsys 2024.4; README of the traces).
NVTX_PROJ_COLUMNS = (
    "Name", "Projected Start", "Projected Duration", "Orig Start", "Orig Duration", "Style",
    "PID", "TID", "NumGPUOps", "Lvl", "NumChild", "RangeId", "ParentId", "RangeStack", "Rank",
)  # fmt: skip
READ_RECIPES = {"nvtx_gpu_proj_trace": "trace.parquet"}
# Recipes we recognise but do not read: their Parquet layouts are not documented by NVIDIA
# (the user guide lists the recipes, not their output columns), so any reading would be a guess.
UNDOCUMENTED = {
    "nccl_gpu_overlap_trace": "its Parquet layout is not documented by NVIDIA (docs/nsys-recipes.md)",
    "cuda_gpu_kern_sum": "its Parquet layout is not documented by NVIDIA (docs/nsys-recipes.md)",
}

REPORT_SUFFIXES = (".nsys-rep", ".qdrep", ".sqlite", ".sqlite3")


class Bundle:
    """The files of one input, by POSIX path relative to it (a folder or a zip)."""

    def __init__(self, path: Path):
        self.path = path
        self._zip: zipfile.ZipFile | None = None
        if path.is_dir():
            self.names = sorted(p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file())
        else:
            try:
                self._zip = zipfile.ZipFile(path)
            except (OSError, zipfile.BadZipFile) as exc:
                raise BadInput(f"not a readable zip ({exc})") from None
            self.names = sorted(i.filename for i in self._zip.infolist() if not i.is_dir())

    def read(self, name: str) -> bytes:
        try:
            if self._zip is not None:
                return self._zip.read(name)
            return (self.path / name).read_bytes()
        except (OSError, KeyError, EOFError, NotImplementedError, zipfile.BadZipFile, zlib.error) as exc:
            raise BadInput(f"{name}: unreadable ({exc})") from None

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()


@dataclass
class Output:
    """One recipe output of the input: its analysis JSON, and its table or why it was not read."""

    folder: str  # POSIX path inside the input ('.' for its root)
    member: str  # its .nsys-analysis file
    analysis: dict
    recipe: str
    table: object = None  # pyarrow Table of the read Parquet file
    reason: str | None = None  # why not read
    reports: list[str] | None = None  # files.parquet: the report (name without suffix) of each recipe Rank

    @property
    def read(self) -> bool:
        return self.table is not None


@dataclass
class Context:
    """What the probe hands the load (and the ingest's workers) for one input."""

    outputs: list[Output]
    keys: dict[tuple[int, int], int]  # (recipe Rank, PID) -> Process.key
    gpu: dict | None = None
    env: dict[str, str] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)  # files of the input that were read
    names: list[str] = field(default_factory=list)
    # Read beside its reports (attach()): (recipe Rank, PID) -> the report's process, as
    # (candidate, Process.key) until the ingest numbers the ranks, then our rank (resolve()).
    beside: dict[tuple[int, int], object] | None = None


def folder_of(name: str) -> str:
    """The folder of a file of the input, as a POSIX path inside it ('.' for its root)."""
    parent = PurePosixPath(name).parent.as_posix()
    return parent if parent else "."


def _parquet(bundle: Bundle, name: str):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.read_table(pa.BufferReader(bundle.read(name)))
    except pa.ArrowException as exc:
        raise BadInput(f"{name}: not a readable Parquet file ({str(exc).splitlines()[0]})") from None


def analysis_outputs(bundle: Bundle) -> list[Output]:
    """One Output per .nsys-analysis file of the input (its JSON must name the recipe)."""
    outputs = []
    for name in (n for n in bundle.names if n.endswith(ANALYSIS_SUFFIX)):
        try:
            analysis = json.loads(bundle.read(name).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BadInput(f"{name}: not a recipe analysis file (invalid JSON: {exc})") from None
        recipe = analysis.get("RecipeName") if isinstance(analysis, dict) else None
        if not isinstance(recipe, str) or not recipe:
            raise BadInput(f"{name}: not a recipe analysis file (no RecipeName)")
        outputs.append(Output(folder_of(name), name, analysis, recipe))
    return outputs


def read_output(bundle: Bundle, out: Output, used: set[str]) -> None:
    """Read the table of a recipe nsight-analyze reads (and files.parquet), or say why not."""
    if out.recipe not in READ_RECIPES:
        out.reason = UNDOCUMENTED.get(
            out.recipe, f"recipe not read by nsight-analyze (it reads {', '.join(READ_RECIPES)})"
        )
        return
    member = READ_RECIPES[out.recipe] if out.folder == "." else f"{out.folder}/{READ_RECIPES[out.recipe]}"
    if member not in bundle.names:
        raise BadInput(f"{out.folder}: {out.recipe} output without its {READ_RECIPES[out.recipe]}")
    table = _parquet(bundle, member)
    missing = [c for c in NVTX_PROJ_COLUMNS if c not in table.column_names]
    if missing:
        raise BadInput(f"{member}: not an {out.recipe} trace (missing columns: {', '.join(missing)})")
    out.table = table
    used.add(member)
    files = "files.parquet" if out.folder == "." else f"{out.folder}/files.parquet"
    if files in bundle.names:  # Rank -> report: column File, row i (or column Rank) = Rank i
        listed = _parquet(bundle, files)
        if "File" in listed.column_names:
            names = [report_name(f) for f in listed.column("File").to_pylist()]
            if "Rank" in listed.column_names:
                ranks = listed.column("Rank").to_pylist()
                whole = all(isinstance(r, int) for r in ranks) and sorted(ranks) == list(range(len(ranks)))
                names = [n for _, n in sorted(zip(ranks, names))] if whole else []
            out.reports = names or None
            used.add(files)
    elif len(out.analysis.get("InputFiles") or []) == 1:  # one report: every row is its Rank 0
        out.reports = [report_name(out.analysis["InputFiles"][0])]


def jax_metadata(bundle: Bundle, ctx: Context) -> None:
    """nsys-jax's metadata files at the input's root: GPU (TARGET_INFO_GPU) and environment."""
    from .nsys_meta import parse_environment

    if JAX_DEVICE_META in bundle.names:
        table = _parquet(bundle, JAX_DEVICE_META)
        ctx.used.add(JAX_DEVICE_META)
        rows = table.to_pylist()
        if len(rows) == 1:  # columns are a two-level header written as "('TABLE', 'column')"
            flat = {}
            for key, value in rows[0].items():
                m = re.match(r"^\('(\w+)', '(\w+)'\)$", key)
                flat[(m.group(1), m.group(2)) if m else ("", key)] = value
            ctx.gpu = flat
    if JAX_SYSTEM_META in bundle.names:
        table = _parquet(bundle, JAX_SYSTEM_META)
        ctx.used.add(JAX_SYSTEM_META)
        values = {}
        if {"name", "value"} <= set(table.column_names):
            values = dict(zip(table.column("name").to_pylist(), table.column("value").to_pylist()))
        env = parse_environment(values.get("DeviceEnvironment") or "")
        if values.get("Hostname"):
            env.setdefault("HOSTNAME", values["Hostname"])
        ctx.env = env


def report_name(value: object) -> str:
    """A report as files.parquet / InputFiles name it, without folder or suffix (/x/r0.nsys-rep: r0)."""
    name = PurePosixPath(str(value).replace("\\", "/")).name
    for suffix in REPORT_SUFFIXES:
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return name
