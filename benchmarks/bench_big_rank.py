"""One large nsys rank (issue 53): a real 2024-era export grown to 2M kernels + 2M CUDA API rows,
timed through the CLI against a bare sqlite3 scan of the same rows (and `nsys stats` when installed).

Usage: .venv/bin/python benchmarks/bench_big_rank.py [--kernels 2000000] [--with-memops]
       [--source FILE] [--work DIR] [--json FILE|-] [--timeout S]
Smoke run: --kernels 200000 (about a minute on 2 cores). The file is built once per --work folder
and reused (DIR/kernels_N/report1.sqlite: the source's name, which reads as rank 0 as the source
does; a number in it would become the rank); without --work a temporary folder is removed at exit.

How the big file is built (plain sqlite3; nothing of nsight_analyze is used, none of it is timed):
  1. --source (default /work/shared/traces/nsys/fuser/report1.sqlite: one rank, 18 kernels, 990
     CUDA API calls, 3 memcpy, 3 memset, 3 synchronization rows, 13,513 NVTX ranges) is copied
     into the work folder; the copy is grown, the source is never written.
  2. The tile: every kernel row and the runtime (CUDA API) row of the same correlationId (its
     launch: cudaLaunchKernel / cuLaunchKernel / cuLaunchKernelEx). With --with-memops the memcpy,
     memset and synchronization rows and their API calls (cudaMemcpyAsync, cudaMemsetAsync,
     cudaStreamSynchronize, cudaDeviceSynchronize) join the tile (then 30 API rows per 18 kernels:
     2M kernels come with 3.3M API rows instead of the issue's 2M).
  3. Copy k (k = 1, 2, ...) of the tile is inserted into the same tables with one INSERT ... SELECT
     per table over a table of k's: start and end shifted by k * (span + 1 ms), span being
     max(end) - min(start) over the tile's rows of every tiled table (so copies follow each other
     in time and never overlap); correlationId shifted by k * (max correlationId of every table + 1)
     in the GPU rows and their API rows alike, so each copied kernel finds its own copied launch;
     the kernels' gridId (NOT NULL, unique per kernel) shifted by k * (max gridId + 1). Every other
     column keeps its value: globalPid / globalTid, deviceId, contextId, streamId, the StringIds
     references (demangledName, shortName, mangledName, nameId), launch configuration, returnValue,
     eventClass. Rows go in in time order (k, then start). The last copy is partial: the first
     kernels in time order (and the tiled rows that start before the first kernel left out) until
     the kernel table holds exactly --kernels rows.
  4. Not tiled: the other 963 API rows (module loading, cuGetProcAddress, mallocs: one-time setup),
     the NVTX ranges (13,513 per copy would make 1.5 billion rows at 2M kernels), every other
     table. They stay as exported, in the first copy's time range.
  5. ANALYSIS_DETAILS.stopTime and .duration grow by the time the copies add, so the capture
     covers every copied row (else the ingest would flag the rows as ending after the capture).
  At the default 2M kernels the file holds 2,000,000 kernels and 2,000,963 API rows.

Phases, each in a fresh process (wall time; CPU time of the process and the children it waited
for; peak RSS: the process's VmHWM read at its exit, or its reaped children's largest
ru_maxrss if larger, e.g. ingest workers, as benchmarks/bench_analysis.py reads it):
  scan           the floor: python sqlite3 reading every column nsight-analyze reads of the kernel
                 and runtime rows (benchmarks/bench_ingest.py FULL; `SELECT count(*), max(c), ...`
                 per table: every value visited, nothing kept). The file is read once before it,
                 untimed, so that it and every later phase find it in the page cache.
  ingest         `nsight-analyze ingest FILE --db W -q` into a new workspace;
  summary, ranks, diagnose, report
                 `nsight-analyze summary --db W`, ..., `report --db W -o X.html`, first runs;
  ... (again)    each command (ingest included: it finds the file unchanged) a second time;
  nsys stats     `nsys stats -r gpukernsum,cudaapisum FILE` when `nsys` is on PATH (peak: ru_maxrss
                 of the process tree).
Targets (issue 53): ingest + summary <= 3x the scan and <= 0.5x nsys stats; ingest + summary +
ranks + diagnose + report (first runs) <= 8x the scan; peak <= 1 GB in every nsight-analyze phase.
Exits 1 when a phase fails (a missed target is reported, not an error).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import platform
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench_ingest import FULL
from precompile import package_bytecode

SOURCE = Path("/work/shared/traces/nsys/fuser/report1.sqlite")
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
MEMOPS = ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")
SCANNED = {t: FULL[t] for t in (KERNEL, RUNTIME)}
GAP_NS = 1_000_000  # between one copy's last row and the next copy's first
PEAK_TARGET_MIB = 1024
COMMANDS = {  # phase: CLI arguments ({db} the workspace, {file} the export, {out} the report)
    "ingest": ["ingest", "{file}", "--db", "{db}", "-q"],
    "summary": ["summary", "--db", "{db}"],
    "ranks": ["ranks", "--db", "{db}"],
    "diagnose": ["diagnose", "--db", "{db}"],
    "report": ["report", "--db", "{db}", "-o", "{out}"],
}


# ------------------------------------------------------------------------------------------------
# The big file


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]


def _has(con: sqlite3.Connection, table: str) -> bool:
    return (
        con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
        is not None
    )


def _count(con: sqlite3.Connection, table: str) -> int:
    return con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0] if _has(con, table) else 0


def counts(path: Path) -> dict[str, int]:
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return {t: _count(con, t) for t in (KERNEL, RUNTIME, *MEMOPS, "NVTX_EVENTS")}
    finally:
        con.close()


def grow(path: Path, kernels: int, with_memops: bool) -> dict:
    """Tile the GPU rows of the export at path (and their API calls) in time until its kernel table
    holds `kernels` rows (the module docstring says how); what was done."""
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode = OFF")
    con.execute("PRAGMA synchronous = OFF")
    con.execute("PRAGMA temp_store = MEMORY")
    gpu_tables = [KERNEL, *(t for t in MEMOPS if with_memops and _has(con, t))]
    base = _count(con, KERNEL)
    if base == 0 or kernels <= base:
        con.close()
        return {"copies": 0, "period_ns": 0}
    # the tile's GPU rows, with the kernels' order in time (the partial last copy takes the first)
    con.execute(
        f"CREATE TEMP TABLE tile_k AS SELECT rowid AS rid, row_number() OVER (ORDER BY start, rowid) AS rn "
        f"FROM {KERNEL}"
    )
    extra = kernels - base
    full, rest = divmod(extra, base)
    cut = None  # the partial copy takes the rows that start before the first kernel it leaves out
    if rest:
        cut = con.execute(
            f"SELECT k.start FROM {KERNEL} k JOIN tile_k t ON t.rid = k.rowid WHERE t.rn = ?", (rest + 1,)
        ).fetchone()[0]
    corr_parts = " UNION ALL ".join(
        f"SELECT correlationId, start FROM {t} WHERE correlationId IS NOT NULL" for t in gpu_tables
    )
    con.execute(
        "CREATE TEMP TABLE tile_corr AS SELECT correlationId AS cid, min(start) AS t0 "
        f"FROM ({corr_parts}) GROUP BY 1"
    )
    spans = [f'SELECT min(start) AS lo, max(coalesce("end", start)) AS hi FROM {t}' for t in gpu_tables] + [
        f'SELECT min(start), max("end") FROM {RUNTIME} WHERE correlationId IN (SELECT cid FROM tile_corr)'
    ]
    lo, hi = con.execute(f"SELECT min(lo), max(hi) FROM ({' UNION ALL '.join(spans)})").fetchone()
    period = hi - lo + GAP_NS
    corr_tables = [t for t in (KERNEL, RUNTIME, *MEMOPS) if _has(con, t)]
    cstride = 1 + max(
        con.execute(f"SELECT coalesce(max(correlationId), 0) FROM {t}").fetchone()[0] for t in corr_tables
    )
    gstride = 1 + con.execute(f"SELECT max(gridId) FROM {KERNEL}").fetchone()[0]
    copies = full + (1 if rest else 0)
    con.execute("CREATE TEMP TABLE tile_n (k INTEGER PRIMARY KEY)")
    con.execute(
        "INSERT INTO tile_n WITH RECURSIVE n(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM n WHERE k < ?) "
        "SELECT k FROM n",
        (copies,),
    )

    def shifted(table: str) -> str:
        cols = _columns(con, table)
        exprs = []
        for c in cols:
            if c in ("start", "end"):
                exprs.append(f'x."{c}" + n.k * {period}')
            elif c == "correlationId":
                exprs.append(f"x.correlationId + n.k * {cstride}")
            elif c == "gridId" and table == KERNEL:
                exprs.append(f"x.gridId + n.k * {gstride}")
            else:
                exprs.append(f'x."{c}"')
        names = ", ".join(f'"{c}"' for c in cols)
        return f"INSERT INTO {table} ({names}) SELECT {', '.join(exprs)}"

    last = f"n.k <= {full}"
    con.execute("BEGIN")
    con.execute(
        f"{shifted(KERNEL)} FROM tile_n n CROSS JOIN {KERNEL} x JOIN tile_k t ON t.rid = x.rowid "
        f"WHERE {last} OR t.rn <= {rest} ORDER BY n.k, x.start, x.rowid"
    )
    for table in gpu_tables[1:]:
        keep = f" OR x.start < {cut}" if cut is not None else ""
        con.execute(
            f"{shifted(table)} FROM tile_n n CROSS JOIN {table} x WHERE {last}{keep} "
            "ORDER BY n.k, x.start, x.rowid"
        )
    keep = f" OR c.t0 < {cut}" if cut is not None else ""
    con.execute(
        f"{shifted(RUNTIME)} FROM tile_n n CROSS JOIN {RUNTIME} x "
        "JOIN tile_corr c ON c.cid = x.correlationId "
        f"WHERE {last}{keep} ORDER BY n.k, x.start, x.rowid"
    )
    if _has(con, "ANALYSIS_DETAILS"):
        con.execute(
            f"UPDATE ANALYSIS_DETAILS SET stopTime = stopTime + {copies * period}, "
            f"duration = duration + {copies * period}"
        )
    con.execute("COMMIT")
    con.close()
    return {
        "copies": copies,
        "full_copies": full,
        "tile_kernels": base,
        "period_ns": period,
        "correlation_stride": cstride,
        "tiled": gpu_tables,
    }


def build(source: Path, work: Path, kernels: int, with_memops: bool) -> tuple[Path, dict]:
    """The grown file in work (reused when there); how it was built."""
    # the source's own name (a size in the name would read as the rank), in a folder of this size
    folder = work / f"kernels_{kernels}{'_memops' if with_memops else ''}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / source.name
    info: dict = {"source": str(source), "path": str(path)}
    if path.exists():
        info["reused"] = True
    else:
        tmp = path.with_suffix(".part")
        tmp.unlink(missing_ok=True)
        t0 = time.perf_counter()
        shutil.copyfile(source, tmp)  # the data, not the source's read-only mode
        info.update(grow(tmp, kernels, with_memops))
        tmp.replace(path)
        info["build_s"] = time.perf_counter() - t0
    info["rows"] = counts(path)
    info["bytes"] = path.stat().st_size
    return path, info


def warm(path: Path) -> None:
    """Read the file once (untimed): every phase then finds it in the page cache."""
    with path.open("rb") as fh:
        while fh.read(1 << 24):
            pass


# ------------------------------------------------------------------------------------------------
# In the child process: one phase, its numbers written to $BENCH_STATS at exit


def _peak_mib() -> float:
    """This process's peak RSS (VmHWM where /proc has it, else ru_maxrss), or that of the largest
    child it reaped (ingest workers) when larger."""
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / scale / 1024
    try:
        with open("/proc/self/status") as fh:
            own = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM")) / 1024
    except (OSError, StopIteration):
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale / 1024
    return max(own, children)


def phase_scan(trace: str) -> dict:
    """The floor: every column nsight-analyze reads of the kernel and runtime rows, visited by
    sqlite3 (max() of each: every value read, nothing kept, no overflow)."""
    con = sqlite3.connect(f"{Path(trace).resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    t0, rows = time.perf_counter(), 0
    for table, wanted in SCANNED.items():
        present = set(_columns(con, table))
        cols = ", ".join(f'max("{c}")' for c in wanted.split() if c in present)
        rows += con.execute(f"SELECT count(*), {cols} FROM {table}").fetchone()[0]
    return {"query_s": time.perf_counter() - t0, "rows": rows}


def child(kind: str, args: list[str]) -> None:
    extra: dict = {}

    def stats() -> None:
        with open(os.environ["BENCH_STATS"], "w") as fh:
            json.dump({"peak_mib": _peak_mib(), **extra}, fh)

    atexit.register(stats)
    if kind == "cli":  # the real CLI, as its entry point runs it
        sys.argv = ["nsight-analyze", *args]
        from nsight_analyze.cli import main

        main()
    else:
        extra.update(globals()[f"phase_{kind}"](*args))


# ------------------------------------------------------------------------------------------------
# In the parent: run and measure each phase


def measure(cmd: list[str], timeout: float | None, cwd: Path | None = None) -> dict:
    """Run cmd in a fresh process: wall and CPU seconds, peak MiB, exit status, its numbers."""
    with tempfile.TemporaryDirectory(prefix="bench_phase_") as tmp:
        stats, out, err = Path(tmp) / "stats.json", Path(tmp) / "stdout", Path(tmp) / "stderr"
        env = {k: v for k, v in os.environ.items() if k != "NSIGHT_ANALYZE_DB"}
        env["BENCH_STATS"] = str(stats)
        with out.open("wb") as fo, err.open("wb") as fe:
            t0 = time.perf_counter()
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=fo, stderr=fe, env=env, cwd=cwd)
            killed: list[bool] = []
            timer = threading.Timer(timeout, lambda: (killed.append(True), proc.kill())) if timeout else None
            if timer:
                timer.start()
            _, status, usage = os.wait4(proc.pid, 0)  # this child's CPU time, its reaped children's included
            wall = time.perf_counter() - t0
            if timer:
                timer.cancel()
            proc.returncode = os.waitstatus_to_exitcode(status)
        scale = 1 if sys.platform == "darwin" else 1024
        result = {
            "wall_s": wall,
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "rc": proc.returncode,
            "peak_mib": usage.ru_maxrss / scale / 1024,  # replaced by the child's own where it wrote one
        }
        if killed:
            result["timed_out"] = True
        if stats.exists():
            result.update(json.loads(stats.read_text()))
        if proc.returncode != 0:
            result["stderr"] = err.read_text(errors="replace")[-2000:]
        return result


def python_phase(kind: str, *args: str, timeout: float | None) -> dict:
    return measure([sys.executable, __file__, "--child", kind, *args], timeout)


def run_phases(trace: Path, work: Path, timeout: float | None) -> dict[str, dict]:
    db, out = trace.parent / "workspace.duckdb", trace.parent / "report.html"
    for path in (db, Path(f"{db}.wal"), out):
        path.unlink(missing_ok=True)
    phases: dict[str, dict] = {}
    warm(trace)
    phases["scan (floor)"] = python_phase("scan", str(trace), timeout=timeout)
    for again in (False, True):
        for name, argv in COMMANDS.items():
            cli = [a.format(db=db, file=trace, out=out) for a in argv]
            label = f"{name} (again)" if again else name
            phases[label] = python_phase("cli", *cli, timeout=timeout)
            if name == "ingest" and phases[label]["rc"] != 0:
                return phases  # nothing to read
    nsys = shutil.which("nsys")
    if nsys:
        phases["nsys stats"] = measure(
            [nsys, "stats", "-r", "gpukernsum,cudaapisum", str(trace)], timeout, cwd=work
        )
    return phases


# ------------------------------------------------------------------------------------------------
# Output


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def targets(phases: dict[str, dict]) -> dict:
    """The issue's ratios and whether each is met (None: not measured)."""

    def wall(*names: str) -> float | None:
        ps = [phases.get(n) for n in names]
        return None if any(p is None or p["rc"] != 0 for p in ps) else sum(p["wall_s"] for p in ps)

    scan, nsys = wall("scan (floor)"), wall("nsys stats")
    first = wall("ingest", "summary")
    every = wall("ingest", "summary", "ranks", "diagnose", "report")
    ours = [p.get("peak_mib") for n, p in phases.items() if n not in ("scan (floor)", "nsys stats")]
    peak = max((p for p in ours if p is not None), default=None)

    def ratio(a: float | None, b: float | None, limit: float) -> dict:
        r = a / b if a is not None and b else None
        return {
            "seconds": a,
            "against_s": b,
            "ratio": r,
            "target": limit,
            "met": None if r is None else r <= limit,
        }

    return {
        "ingest+summary / scan": ratio(first, scan, 3.0),
        "ingest+summary+ranks+diagnose+report / scan": ratio(every, scan, 8.0),
        "ingest+summary / nsys stats": ratio(first, nsys, 0.5),
        "peak MiB": {
            "peak_mib": peak,
            "target": PEAK_TARGET_MIB,
            "met": None if peak is None else peak <= PEAK_TARGET_MIB,
        },
    }


def print_results(info: dict, phases: dict[str, dict], goals: dict) -> None:
    rows = info["rows"]
    built = "reused" if info.get("reused") else f"built in {info.get('build_s', 0):.1f} s, not timed"
    print(
        f"{Path(info['path']).parent.name}/{Path(info['path']).name}: {rows[KERNEL]:,} kernels, "
        f"{rows[RUNTIME]:,} CUDA API rows, "
        f"{sum(rows[t] for t in MEMOPS):,} memcpy/memset/sync rows, {rows['NVTX_EVENTS']:,} NVTX ranges, "
        f"{info['bytes'] / 2**20:,.0f} MiB ({built})"
    )
    if info.get("copies"):
        print(
            f"  {info['copies']:,} copies of {info['tile_kernels']} kernels, "
            f"one every {info['period_ns'] / 1e9:.3f} s (tiled: "
            f"{', '.join(t.replace('CUPTI_ACTIVITY_KIND_', '') for t in info['tiled'])} + their API rows)"
        )
    scan = phases.get("scan (floor)", {}).get("wall_s")
    print(f"\n  {'phase':<20} {'wall s':>8} {'CPU s':>8} {'peak MiB':>9} {'x scan':>7}  note")
    for name, p in phases.items():
        note = f"FAILED (exit {p['rc']})" if p["rc"] != 0 else ""
        if p.get("timed_out"):
            note = "TIMED OUT (--timeout)"
        if p.get("query_s") is not None and p["rc"] == 0:
            note = f"query {p['query_s']:.2f} s, {p['rows']:,} rows"
        ratio = p["wall_s"] / scan if scan else None
        print(
            f"  {name:<20} {p['wall_s']:>8.2f} {_fmt(p['cpu_s'], '>8.2f')} "
            f"{_fmt(p.get('peak_mib'), '>9,.0f')} "
            f"{_fmt(ratio, '>7.1f')}  {note}"
        )
        if p["rc"] != 0 and p.get("stderr"):
            print("    " + (p["stderr"].strip().splitlines() or [""])[-1])
    if "nsys stats" not in phases:
        print("  nsys not installed: ratio not measured")

    def verdict(met: bool | None) -> str:
        return "not measured" if met is None else ("met" if met else "MISSED")

    print("\n  issue 53 targets:")
    for name, g in goals.items():
        if name == "peak MiB":
            print(
                f"    peak of the nsight-analyze phases: {_fmt(g['peak_mib'], ',.0f')} MiB "
                f"(target <= 1 GB): {verdict(g['met'])}"
            )
            continue
        if g["ratio"] is None:
            print(f"    {name}: not measured (target <= {g['target']:g}x)")
        else:
            print(
                f"    {name}: {g['seconds']:.2f} s / {g['against_s']:.2f} s = {g['ratio']:.2f}x "
                f"(target <= {g['target']:g}x): {verdict(g['met'])}"
            )


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", type=int, default=2_000_000, help="kernel rows of the grown file")
    ap.add_argument(
        "--with-memops", action="store_true",
        help="tile the memcpy, memset and synchronization rows (and their API calls) too",
    )  # fmt: skip
    ap.add_argument("--source", type=Path, default=SOURCE, help="the export to grow (never written)")
    ap.add_argument("--work", type=Path, default=None, help="keep the grown file and workspace here (reused)")
    ap.add_argument(
        "--json", dest="json_out", default=None, metavar="FILE", help="also write the numbers (- = stdout)"
    )
    ap.add_argument("--timeout", type=float, default=None, help="seconds one phase may run (killed after)")
    args = ap.parse_args()
    if not args.source.exists():
        print(f"no source export at {args.source} (--source FILE)", file=sys.stderr)
        return 2
    package_bytecode()  # as installed: no process compiles the package (precompile.py)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench_big_rank_"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        trace, info = build(args.source, work, args.kernels, args.with_memops)
        phases = run_phases(trace, work, args.timeout)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    goals = targets(phases)
    print_results(info, phases, goals)
    import duckdb

    doc = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "duckdb": duckdb.__version__,
        },
        "settings": {"kernels": args.kernels, "with_memops": args.with_memops},
        "file": info,
        "phases": phases,
        "targets": goals,
    }
    if args.json_out == "-":
        print(json.dumps(doc, indent=2))
    elif args.json_out:
        Path(args.json_out).write_text(json.dumps(doc, indent=2) + "\n")
    failed = [n for n, p in phases.items() if p["rc"] != 0]
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
