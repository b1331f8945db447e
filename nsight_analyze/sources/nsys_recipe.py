"""Nsight Systems multi-report recipe outputs: `nsys recipe NAME` output folders, or zips of them.

Why: users already run NVIDIA's recipes (`nsys recipe nvtx_gpu_proj_trace ...`) and keep their
output rather than the reports (nsys-jax archives ship recipe output with the `.nsys-rep`
stripped). A recipe output folder holds NAME.nsys-analysis (JSON: RecipeName, InputFiles,
...) beside Parquet files. One input here is either such a folder, a folder holding recipe
folders beside nsys-jax's `device-metadata.parquet`, or a `.zip` of either; it becomes one
`files` row and one rank per process the recipe output covers.

What is read (docs/nsys-recipes.md): `nvtx_gpu_proj_trace` (trace.parquet, columns below) into
`recipe_nvtx_gpu_proj`, and its files.parquet (which report each recipe Rank is); nsys-jax's
device-/system-metadata.parquet for the GPU, host name and rank variables of a single-process
archive. Every recipe output found is listed in `recipe_outputs`, read or not: recipes whose
Parquet layout NVIDIA does not document (nccl_gpu_overlap_trace, cuda_gpu_kern_sum: the user
guide names them and what they compute, never their files or columns) are listed as not read
with the reason, and every other file of the input is counted in `files.skipped`. Nothing is
dropped silently.

Beside its reports (`attach`, `resolve`, called by the ingest around the rank numbering): a
recipe output whose every (Rank, PID) names a process of an nsys report in the same ingest (or
the workspace) gets no ranks of its own; its rows go to those reports' ranks.

The recipe's numbers are stored as NVIDIA computed them; queries/steps/nvtx_projection_compare.sql
puts them beside our own projection (queries/steps/nvtx_gpu_projection.sql).
"""

from __future__ import annotations

import json
import re
import zipfile
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..duck import sql_string
from .base import BadInput, LoadResult, Probe, Process

FORMAT = "nsys-recipe"
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


# ---------------------------------------------------------------------------- discovery


def is_bundle_dir(path: Path) -> bool:
    """A recipe output folder, or an (unzipped) nsys-jax archive holding recipe folders."""
    try:
        if not path.is_dir():
            return False
        if any(path.glob(f"*{ANALYSIS_SUFFIX}")):
            return True
        return (path / JAX_DEVICE_META).is_file() and any(path.glob(f"*/*{ANALYSIS_SUFFIX}"))
    except OSError:
        return False


def walk(root: Path) -> list[Path]:
    """Every file below `root` (as `rglob`), except that a recipe bundle folder is one entry
    and its own files are not listed (they are read, or counted as not read, by this module)."""
    if is_bundle_dir(root):
        return [root]
    entries = list(root.rglob("*"))
    bundles = sorted((p for p in entries if is_bundle_dir(p)), key=lambda p: len(p.parts))
    outer: list[Path] = []
    for b in bundles:  # a recipe folder inside an nsys-jax folder belongs to it
        if not any(o in b.parents for o in outer):
            outer.append(b)
    inside = set(outer)
    # every entry but real folders: links (dangling ones too) and named pipes, sockets and
    # devices are listed, for the ingest to report (a FIFO is never opened: ingest_inputs._special_file)
    files = [
        p for p in entries if (p.is_symlink() or not p.is_dir()) and not any(q in inside for q in p.parents)
    ]
    return files + outer


def input_size(path: Path) -> int:
    """Bytes of an input: a file's size, a folder's files' total."""
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def sniff(path: Path) -> bool:
    path = Path(path)
    if path.is_dir():
        return is_bundle_dir(path)
    if path.suffix.lower() != ".zip":
        return False
    try:
        with zipfile.ZipFile(path) as zf:
            return any(n.endswith(ANALYSIS_SUFFIX) for n in zf.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


# ---------------------------------------------------------------------------- one input


class _Bundle:
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
class _Output:
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
class _Context:
    outputs: list[_Output]
    keys: dict[tuple[int, int], int]  # (recipe Rank, PID) -> Process.key
    gpu: dict | None = None
    env: dict[str, str] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)  # files of the input that were read
    names: list[str] = field(default_factory=list)
    # Read beside its reports (attach()): (recipe Rank, PID) -> the report's process, as
    # (candidate, Process.key) until the ingest numbers the ranks, then our rank (resolve()).
    beside: dict[tuple[int, int], object] | None = None


def _folder(name: str) -> str:
    parent = PurePosixPath(name).parent.as_posix()
    return parent if parent else "."


def _parquet(bundle: _Bundle, name: str):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.read_table(pa.BufferReader(bundle.read(name)))
    except pa.ArrowException as exc:
        raise BadInput(f"{name}: not a readable Parquet file ({str(exc).splitlines()[0]})") from None


def _outputs(bundle: _Bundle) -> list[_Output]:
    outputs = []
    for name in (n for n in bundle.names if n.endswith(ANALYSIS_SUFFIX)):
        try:
            analysis = json.loads(bundle.read(name).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BadInput(f"{name}: not a recipe analysis file (invalid JSON: {exc})") from None
        recipe = analysis.get("RecipeName") if isinstance(analysis, dict) else None
        if not isinstance(recipe, str) or not recipe:
            raise BadInput(f"{name}: not a recipe analysis file (no RecipeName)")
        outputs.append(_Output(_folder(name), name, analysis, recipe))
    return outputs


def _read_output(bundle: _Bundle, out: _Output, used: set[str]) -> None:
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
            names = [_report_name(f) for f in listed.column("File").to_pylist()]
            if "Rank" in listed.column_names:
                ranks = listed.column("Rank").to_pylist()
                whole = all(isinstance(r, int) for r in ranks) and sorted(ranks) == list(range(len(ranks)))
                names = [n for _, n in sorted(zip(ranks, names))] if whole else []
            out.reports = names or None
            used.add(files)
    elif len(out.analysis.get("InputFiles") or []) == 1:  # one report: every row is its Rank 0
        out.reports = [_report_name(out.analysis["InputFiles"][0])]


def _jax_metadata(bundle: _Bundle, ctx: _Context) -> None:
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


def _int(value) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def probe(path: Path) -> Probe:
    from .nsys_meta import LOCAL_RANK_VARIABLES, RANK_VARIABLES, WORLD_SIZE_VARIABLES

    bundle = _Bundle(Path(path))
    try:
        outputs = _outputs(bundle)
        if not outputs:
            raise BadInput(f"no {ANALYSIS_SUFFIX} file: not a recipe output")
        ctx = _Context(outputs, {}, names=bundle.names)
        for out in outputs:
            ctx.used.add(out.member)
            _read_output(bundle, out, ctx.used)
        if not any(o.read for o in outputs):
            found = ", ".join(sorted({f"{o.recipe} ({o.reason})" for o in outputs}))
            raise BadInput(f"no recipe output nsight-analyze reads: found {found}")
        _jax_metadata(bundle, ctx)
    finally:
        bundle.close()
    pairs: set[tuple[int, int]] = set()
    for out in outputs:
        if out.read:
            ranks = out.table.column("Rank").to_pylist()
            pids = out.table.column("PID").to_pylist()
            pairs |= {(int(r), int(p)) for r, p in zip(ranks, pids) if r is not None and p is not None}
    ctx.keys = {pair: i for i, pair in enumerate(sorted(pairs))}
    processes = [Process(key=i, pid=pid) for (_, pid), i in ctx.keys.items()]
    if len(processes) == 1:  # an nsys-jax archive: one report, its metadata is this process's
        proc, env, gpu = processes[0], ctx.env, ctx.gpu or {}
        for var in RANK_VARIABLES:
            if _int(env.get(var)) is not None:
                proc.claimed_rank, proc.rank_source = int(env[var]), f"env:{var}"
                break
        else:
            xla = re.search(r"process=(\d+)", str(gpu.get(("TARGET_INFO_NVTX_CUDA_DEVICE", "name")) or ""))
            if xla:
                proc.claimed_rank, proc.rank_source = int(xla.group(1)), "nsys-jax:xla-device"
        proc.local_rank = next(
            (_int(env[v]) for v in LOCAL_RANK_VARIABLES if _int(env.get(v)) is not None), None
        )
        proc.world_size = next(
            (_int(env[v]) for v in WORLD_SIZE_VARIABLES if _int(env.get(v)) is not None), None
        )
        proc.hostname = env.get("HOSTNAME")
        proc.gpu_name = gpu.get(("TARGET_INFO_GPU", "name"))
        proc.device_id = _int(gpu.get(("", "cuDevice")))
    versions = sorted({str(o.analysis.get("RecipeRuntimeVersion")) for o in outputs if o.read})
    return Probe(FORMAT, processes, version=", ".join(versions) or None, context=ctx)


# ---------------------------------------------------------------------------- load

_INSERT_NVTX = """
INSERT INTO recipe_nvtx_gpu_proj
SELECT m.rank, ?, ?, CAST(t."Rank" AS INTEGER), t."Name",
       CAST(t."Projected Start" AS BIGINT), CAST(t."Projected Duration" AS BIGINT),
       CAST(t."Projected Start" AS BIGINT) + CAST(t."Projected Duration" AS BIGINT),
       CAST(round(t."Orig Start") AS BIGINT), CAST(round(t."Orig Duration") AS BIGINT),
       CAST(round(t."Orig Start") AS BIGINT) + CAST(round(t."Orig Duration") AS BIGINT),
       t."Style", CAST(t."PID" AS BIGINT), CAST(t."TID" AS BIGINT), CAST(t."NumGPUOps" AS BIGINT),
       CAST(t."Lvl" AS INTEGER), CAST(t."NumChild" AS BIGINT), CAST(t."RangeId" AS BIGINT),
       CAST(t."ParentId" AS BIGINT), t."RangeStack"
FROM _recipe_in AS t
JOIN _recipe_ranks AS m ON m.recipe_rank = t."Rank" AND m.pid = t."PID"
"""


def load(con, path: Path, file_id: int, ranks: dict[int, int], probe: Probe) -> LoadResult:
    import pyarrow as pa

    from .nsys_meta import keep_env

    ctx: _Context = probe.context
    result = LoadResult()
    beside = ctx.beside is not None  # rows of reports' ranks (resolve()), not ranks of its own
    owner = {pair: int(rank) for pair, rank in ctx.beside.items()} if beside else {
        pair: ranks[k] for pair, k in ctx.keys.items()
    }  # fmt: skip
    mapping = pa.table(
        {
            "recipe_rank": [r for (r, _) in owner],
            "pid": [p for (_, p) in owner],
            "rank": list(owner.values()),
        }
    )
    con.register("_recipe_ranks", mapping)
    try:
        for out in ctx.outputs:
            n = 0
            if out.read:
                con.register("_recipe_in", out.table)
                try:
                    con.execute(_INSERT_NVTX, [file_id, out.folder])
                finally:
                    con.unregister("_recipe_in")
                n = out.table.num_rows
                result.counts["recipe_nvtx_gpu_proj"] = result.counts.get("recipe_nvtx_gpu_proj", 0) + n
            else:
                result.skipped.append(f"recipe output {out.folder} ({out.recipe}): not read ({out.reason})")
            a = out.analysis
            con.execute(
                "INSERT INTO recipe_outputs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    file_id, out.folder, out.recipe, a.get("DisplayName"),
                    "/".join(str(a.get(k)) for k in ("RecipeJsonVersion", "RecipeRuntimeVersion")),
                    a.get("StartTime"), a.get("EndTime"),
                    [str(x) for x in a.get("InputFiles") or []],
                    "read" if out.read else "not read", n, out.reason,
                ],
            )  # fmt: skip
    finally:
        con.unregister("_recipe_ranks")
    if beside:  # the reports hold the GPU and environment of these ranks
        _count_unread(ctx, result)
        return result
    if len(probe.processes) == 1 and ctx.gpu:
        _insert_gpu(con, ranks[probe.processes[0].key], ctx.gpu)
        result.counts["gpus"] = 1
    kept = sorted((k, v) for k, v in ctx.env.items() if keep_env(k))
    if kept:
        con.executemany("INSERT INTO env VALUES (?, ?, ?)", [(file_id, k, v) for k, v in kept])
    _count_unread(ctx, result)
    return result


def _insert_gpu(con, rank: int, gpu: dict) -> None:
    g = {col: value for (table, col), value in gpu.items() if table == "TARGET_INFO_GPU"}
    con.execute(
        "INSERT INTO gpus VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'TARGET_INFO_GPU')",
        [
            rank, _int(gpu.get(("", "cuDevice"))), g.get("name"), _int(g.get("smCount")),
            _int(g.get("clockRate")), _int(g.get("memoryBandwidth")), _int(g.get("totalMemory")),
            _int(g.get("computeMajor")), _int(g.get("computeMinor")), g.get("uuid"), g.get("busLocation"),
        ],
    )  # fmt: skip


def _count_unread(ctx: _Context, result: LoadResult) -> None:
    """Every file of the input that was not read, counted by its top folder (or its own name)."""
    groups: Counter[str] = Counter()
    read_folders = {o.folder for o in ctx.outputs}
    for name in ctx.names:
        if name in ctx.used:
            continue
        folder = _folder(name)
        if folder in read_folders:  # the rest of a recipe folder (notebooks, plots, other tables)
            groups[f"{folder}/"] += 1
        else:
            top = PurePosixPath(name).parts[0]
            groups[f"{top}/" if "/" in name else top] += 1
    if groups:
        parts = ", ".join(f"{what} {n}" for what, n in sorted(groups.items()))
        result.skipped.append(
            f"files of the input not read: {sum(groups.values())} "
            f"({parts}; not recipe tables nsight-analyze reads)"
        )


# ---------------------------------------------------------------------------- beside its reports

REPORT_SUFFIXES = (".nsys-rep", ".qdrep", ".sqlite", ".sqlite3")
NSYS = "nsys-sqlite"  # nsys_sqlite.FORMAT (sources import no other source but base)


def _report_name(value: object) -> str:
    """A report as files.parquet / InputFiles name it, without folder or suffix (/x/r0.nsys-rep: r0)."""
    name = PurePosixPath(str(value).replace("\\", "/")).name
    for suffix in REPORT_SUFFIXES:
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return name


def _names(ctx: _Context) -> dict[int, str] | None:
    """recipe Rank -> report name over the read outputs; None when unknown or contradictory."""
    names: dict[int, str] = {}
    for out in ctx.outputs:
        if not out.read:
            continue
        if out.reports is None:
            return None
        for rank, name in enumerate(out.reports):
            if names.setdefault(rank, name) != name:
                return None
    return names


def attach(con, ready: list) -> None:
    """Recipe outputs computed from reports of this ingest (or of the workspace) are read beside
    them: their rows go to those reports' ranks and they get no ranks of their own.

    Why: users run `nsys recipe` on the reports they also ingest, and keep both in one folder;
    that is the one case where the recipe's numbers and ours (nvtx_projection_compare) can be put
    side by side. A recipe output matches when every (Rank, PID) of its rows names a report
    (files.parquet, or its one InputFiles entry) that is an nsys export in this ingest or in the
    workspace, by name without suffix, with a process of that PID; otherwise it stays an input of
    its own (and mixing it with the reports is refused, with `unmatched_hint`'s reason).
    Call before the ranks are numbered; `resolve` after."""
    reports: dict[str, list] = {}
    for cand in ready:
        if cand.probe.format == NSYS:
            reports.setdefault(_report_name(cand.path.name), []).append(cand)
    replaced = {fid for c in ready for fid in c.replaces}
    known: dict[tuple[str, int], list[int]] = {}
    for path, pid, rank, fid in con.execute(
        "SELECT f.path, r.pid, r.rank, f.file_id FROM files AS f JOIN ranks AS r USING (file_id) "
        f"WHERE f.source_format = {sql_string(NSYS)}"
    ).fetchall():
        if fid not in replaced and pid is not None:
            known.setdefault((_report_name(path), int(pid)), []).append(int(rank))
    for cand in ready:
        if cand.probe.format != FORMAT or not cand.probe.processes:
            continue
        ctx: _Context = cand.probe.context
        names = _names(ctx)
        if names is None:
            continue
        found: dict[tuple[int, int], object] = {}
        for recipe_rank, pid in ctx.keys:
            name = names.get(recipe_rank)
            procs = [(c, p.key) for c in reports.get(name, []) for p in c.probe.processes if p.pid == pid]
            if len(procs) == 1:
                found[(recipe_rank, pid)] = procs[0]
            elif not procs and len(known.get((name, pid), [])) == 1:
                found[(recipe_rank, pid)] = known[(name, pid)][0]
        if len(found) == len(ctx.keys):
            ctx.beside = found
            cand.probe.processes = []


def resolve(ready: list) -> None:
    """After the ranks are numbered: each matched (Rank, PID) becomes the rank of its report's
    process (plain numbers: the probe travels to the ingest's workers)."""
    for cand in ready:
        ctx = cand.probe.context if cand.probe.format == FORMAT else None
        if ctx is not None and ctx.beside is not None:
            ctx.beside = {
                pair: (who if isinstance(who, int) else who[0].ranks[who[1]])
                for pair, who in ctx.beside.items()
            }


def unmatched_hint(ready: list) -> str:
    """Why a recipe output among `ready` was not read beside the reports (the refusal of mixed
    formats says it instead of its generic advice), or '' when there is none."""
    for cand in ready:
        if cand.probe.format != FORMAT or not cand.probe.processes:
            continue
        names = _names(cand.probe.context)
        if names is None:
            source = "names no report it was computed from (no files.parquet)"
        else:
            shown = sorted(set(names.values()))
            listed = ", ".join(shown[:3]) + (f" and {len(shown) - 3} more" if len(shown) > 3 else "")
            source = f"was computed from {listed}, not among these traces with the same PIDs"
        return (
            f"recipe output {cand.path.name} {source}: ingest it with the reports it was computed "
            "from, or alone into its own workspace"
        )
    return ""
