"""Nsight Systems multi-report recipe outputs: `nsys recipe NAME` output folders, or zips of them.

Why: users already run NVIDIA's recipes (`nsys recipe nvtx_gpu_proj_trace ...`) and keep their
output rather than the reports (nsys-jax archives ship recipe output with the `.nsys-rep`
stripped). A recipe output folder holds NAME.nsys-analysis (JSON: RecipeName, InputFiles,
...) beside Parquet files. One input here is either such a folder, a folder holding recipe
folders beside nsys-jax's `device-metadata.parquet`, or a `.zip` of either; it becomes one
`files` row and one rank per process the recipe output covers.

What is read (docs/nsys-recipes.md; nsys_recipe_bundle.py reads the files):
`nvtx_gpu_proj_trace` (trace.parquet, columns below) into `recipe_nvtx_gpu_proj`, and its
files.parquet (which report each recipe Rank is); nsys-jax's device-/system-metadata.parquet
for the GPU, host name and rank variables of a single-process archive. Every recipe output
found is listed in `recipe_outputs`, read or not: recipes whose Parquet layout NVIDIA does not
document (nccl_gpu_overlap_trace, cuda_gpu_kern_sum: the user guide names them and what they
compute, never their files or columns) are listed as not read with the reason, and every other
file of the input is counted in `files.skipped`. Nothing is dropped silently.

Beside its reports (`attach`, `resolve`, the optional hooks of sources/base.py the ingest calls
through the registry around the rank numbering): a recipe output whose every (Rank, PID) names a
process of an nsys report in the same ingest (or the workspace) gets no ranks of its own; its
rows go to those reports' ranks, and stay the recipe file's (RANK_TABLES_OWNED_BY_FILE).

The recipe's numbers are stored as NVIDIA computed them; queries/steps/nvtx_projection_compare.sql
puts them beside our own projection (queries/steps/nvtx_gpu_projection.sql).
"""

from __future__ import annotations

import re
import zipfile
from collections import Counter
from pathlib import Path, PurePosixPath

from ..store.duck import sql_string
from ..store.query_layer import statements
from .base import BadInput, LoadResult, Probe, Process
from .nsys_recipe_bundle import (
    ANALYSIS_SUFFIX,
    JAX_DEVICE_META,
    Bundle,
    Context,
    analysis_outputs,
    folder_of,
    jax_metadata,
    read_output,
    report_name,
)

SQL = statements("sources/nsys_recipe")

FORMAT = "nsys-recipe"
# Rows under reports' ranks that belong to this file (file_id) when it is read beside them
# (sources/base.py: replacing a report deletes its ranks' rows, not these)
RANK_TABLES_OWNED_BY_FILE = ("recipe_nvtx_gpu_proj",)


# ---------------------------------------------------------------------------- discovery


def is_bundle_dir(path: Path) -> bool:
    """A recipe output folder, or an (unzipped) nsys-jax archive holding recipe folders: one input
    (sniff; registry.walk lists it as one entry, not its files)."""
    try:
        if not path.is_dir():
            return False
        if any(path.glob(f"*{ANALYSIS_SUFFIX}")):
            return True
        return (path / JAX_DEVICE_META).is_file() and any(path.glob(f"*/*{ANALYSIS_SUFFIX}"))
    except OSError:
        return False


def input_size(path: Path) -> int:
    """Bytes of an input (registry.input_size): a file's size, a folder's files' total."""
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


def _int(value) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def probe(path: Path) -> Probe:
    from .nsys_meta import LOCAL_RANK_VARIABLES, RANK_VARIABLES, WORLD_SIZE_VARIABLES

    bundle = Bundle(Path(path))
    try:
        outputs = analysis_outputs(bundle)
        if not outputs:
            raise BadInput(f"no {ANALYSIS_SUFFIX} file: not a recipe output")
        ctx = Context(outputs, {}, names=bundle.names)
        for out in outputs:
            ctx.used.add(out.member)
            read_output(bundle, out, ctx.used)
        if not any(o.read for o in outputs):
            found = ", ".join(sorted({f"{o.recipe} ({o.reason})" for o in outputs}))
            raise BadInput(f"no recipe output nsight-analyze reads: found {found}")
        jax_metadata(bundle, ctx)
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


def load(con, path: Path, file_id: int, ranks: dict[int, int], probe: Probe) -> LoadResult:
    import pyarrow as pa

    from .nsys_meta import keep_env

    ctx: Context = probe.context
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
                    con.execute(SQL["insert_nvtx_projection"], [file_id, out.folder])
                finally:
                    con.unregister("_recipe_in")
                n = out.table.num_rows
                result.counts["recipe_nvtx_gpu_proj"] = result.counts.get("recipe_nvtx_gpu_proj", 0) + n
            else:
                result.skipped.append(f"recipe output {out.folder} ({out.recipe}): not read ({out.reason})")
            a = out.analysis
            con.execute(
                SQL["insert_output"],
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
        con.executemany(SQL["insert_env"], [(file_id, k, v) for k, v in kept])
    _count_unread(ctx, result)
    return result


def _insert_gpu(con, rank: int, gpu: dict) -> None:
    g = {col: value for (table, col), value in gpu.items() if table == "TARGET_INFO_GPU"}
    con.execute(
        SQL["insert_gpu"],
        [
            rank, _int(gpu.get(("", "cuDevice"))), g.get("name"), _int(g.get("smCount")),
            _int(g.get("clockRate")), _int(g.get("memoryBandwidth")), _int(g.get("totalMemory")),
            _int(g.get("computeMajor")), _int(g.get("computeMinor")), g.get("uuid"), g.get("busLocation"),
        ],
    )  # fmt: skip


def _count_unread(ctx: Context, result: LoadResult) -> None:
    """Every file of the input that was not read, counted by its top folder (or its own name)."""
    groups: Counter[str] = Counter()
    read_folders = {o.folder for o in ctx.outputs}
    for name in ctx.names:
        if name in ctx.used:
            continue
        folder = folder_of(name)
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

NSYS = "nsys-sqlite"  # nsys_sqlite.FORMAT (sources import no other source but base)


def _names(ctx: Context) -> dict[int, str] | None:
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
            reports.setdefault(report_name(cand.path.name), []).append(cand)
    replaced = {fid for c in ready for fid in c.replaces}
    known: dict[tuple[str, int], list[int]] = {}
    for path, pid, rank, fid in con.execute(SQL.sql("report_processes", format=sql_string(NSYS))).fetchall():
        if fid not in replaced and pid is not None:
            known.setdefault((report_name(path), int(pid)), []).append(int(rank))
    for cand in ready:
        if cand.probe.format != FORMAT or not cand.probe.processes:
            continue
        ctx: Context = cand.probe.context
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
