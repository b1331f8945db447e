"""Kineto ingest benchmark: N ranks × M GPU events -> workspace -> breakdown + overlap, vs HTA.

Why: PyTorch-profiler traces of real jobs are 100 MB to > 1 GB per rank; the ingest must stay
fast and bounded in memory (peak RSS must not grow with the file). This tiles a shared Kineto
trace in time until each rank has M GPU events (kernels + memcpy/memset), writes one gzip file
per rank with `distributedInfo.rank` rewritten, then, in a fresh subprocess per measurement,
runs ingest, then on fresh connections (a) the breakdown + overlap (view tp_breakdown: what
HTA's get_temporal_breakdown + get_comm_comp_overlap give) and (b) `summary()` (what
`nsight-analyze summary` computes: that breakdown per step too, with the causes of the idle
time, which HTA's breakdown has not), and HolisticTraceAnalysis (HTA) on the same files
(TraceAnalysis load + get_temporal_breakdown + get_comm_comp_overlap), and prints both with
their ratios: like for like (ingest + breakdown vs HTA), and with our summary. A third line, the
bare read, is the baseline any DuckDB-based reader pays: pyarrow imported, each file's
`traceEvents` read by DuckDB's JSON reader into a table of a new workspace file, a checkpoint
(no canonical tables, no analysis). On small files it is the floor of a per-file cost (the real
two-rank trace_filter pair: the bare read alone took 0.53-0.82 of HTA's time in six runs);
on large ones our reader's parallel pieces beat it. HTA runs when
it is importable here or when --hta-python names an interpreter that has it (HTA is not a
dependency of this project: install it in a venv of its own).

    .venv/bin/python benchmarks/bench_kineto.py                      # 8 ranks + one big file (~2 min)
    .venv/bin/python benchmarks/bench_kineto.py --ranks 8,32,64 --hta-python /tmp/hta-venv/bin/python
    .venv/bin/python benchmarks/bench_kineto.py --ranks 0 --big-gpu-events 2000000   # ~1 GB JSON file

Time: HTA's load and analysis times start after `from hta.trace_analysis import TraceAnalysis`;
our ingest time includes the imports of the readers it loads lazily (the Kineto reader and
pyarrow: about 0.3 s; no pandas). The "whole process" line compares both processes from
interpreter start to exit, imports included: what a user waits for.

Memory: "peak RSS" is the larger of (a) the largest single process's peak RSS
(getrusage(RUSAGE_CHILDREN) of an intermediate process, exact) and (b) the peak of the
process tree's summed PSS (HTA parses in forked worker processes), sampled every 0.5 s.

Tiled files: the source's events are repeated k times, shifted by k × (its span + 1 ms), with
correlation / External ids offset per tile so launches still pair with their GPU work. Every
rank's file shares one compressed body (gzip members concatenate), so generating 64 ranks costs
one compression.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from precompile import package_bytecode

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = ROOT.parent / "shared/traces/kineto/hta/trace_filter/sampled_rank-0.json.gz"
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
ID_STRIDE = 10**8  # per-tile offset of correlation / External ids (source ids are < 1e8)

HTA_SCRIPT = """
import json, logging, sys, time, warnings
warnings.simplefilter("ignore")
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
t0 = time.perf_counter()
analyzer = TraceAnalysis(trace_dir=sys.argv[1])
t1 = time.perf_counter()
analyzer.get_temporal_breakdown(visualize=False)
analyzer.get_comm_comp_overlap(visualize=False)
print(json.dumps({"load_s": t1 - t0, "analysis_s": time.perf_counter() - t1}))
"""
# One sample of a 3 GB process's smaps_rollup costs ~40 ms of CPU: at 10 Hz the sampler took 40%
# of a core from the measured run on a 2-core machine. At 2 Hz it perturbs little; the largest
# single process's peak (getrusage) is exact whatever the rate.
SAMPLE_S = 0.5


# ---------------------------------------------------------------------------------------------
# tiled traces
# ---------------------------------------------------------------------------------------------
def _shift_ids(args: dict, offset: int) -> dict:
    out = dict(args)
    for key in ("correlation", "External id"):
        if isinstance(out.get(key), int):
            out[key] += offset
    return out


def tile_body(source: Path, gpu_events: int) -> tuple[bytes, int, int]:
    """Compressed `traceEvents` array body (without brackets) with >= gpu_events GPU events."""
    doc = json.loads(gzip.open(source).read() if source.name.endswith(".gz") else source.read_text())
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float))]
    meta = [e for e in doc["traceEvents"] if e.get("ph") == "M"]
    per_tile = sum(1 for e in events if e.get("cat") in GPU_CATS)
    if not per_tile:
        raise SystemExit(f"{source} has no GPU events to tile")
    start = min(e["ts"] for e in events)
    span = max(e["ts"] + e.get("dur", 0) for e in events) - start
    period = int(span) + 1000  # µs: tiles never overlap
    tiles = -(-gpu_events // per_tile)
    comp = gzip.compress  # one member per tile keeps memory at one tile
    parts: list[bytes] = [comp(b",".join(json.dumps(e).encode() for e in meta), compresslevel=1)]
    total = 0
    for k in range(tiles):
        shifted = []
        for e in events:
            e2 = dict(e)
            e2["ts"] = e["ts"] + k * period
            if e.get("name", "").startswith("ProfilerStep#"):  # keep step numbers distinct per tile
                e2["name"] = f"ProfilerStep#{int(e['name'][13:]) + k * 1000}"
            if isinstance(e.get("args"), dict):
                e2["args"] = _shift_ids(e["args"], k * ID_STRIDE)
            if e.get("cat") == "ac2g" and isinstance(e.get("id"), int):
                e2["id"] = e["id"] + k * ID_STRIDE
            shifted.append(json.dumps(e2).encode())
        total += len(shifted)
        parts.append(comp(b"," + b",".join(shifted), compresslevel=1))
    return b"".join(parts), tiles * per_tile, total + len(meta)


def write_job(out: Path, ranks: int, body: bytes) -> list[Path]:
    """One gzip file per rank: own header (distributedInfo.rank), shared body and tail members."""
    out.mkdir(parents=True, exist_ok=True)
    tail = gzip.compress(b"]}", compresslevel=1)
    paths = []
    for r in range(ranks):
        head = {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": r, "world_size": ranks}}
        text = json.dumps(head)[:-1] + ', "traceEvents": ['
        path = out / f"rank{r}.pt.trace.json.gz"
        with open(path, "wb") as fh:
            fh.write(gzip.compress(text.encode(), compresslevel=1))
            fh.write(body)
            fh.write(tail)
        paths.append(path)
    return paths


# ---------------------------------------------------------------------------------------------
# measurement: parent -> intermediate (RUSAGE_CHILDREN) -> worker
# ---------------------------------------------------------------------------------------------
def worker(folder: Path, db: Path, analyse: bool, sql_timeout: float) -> None:
    """Ingest the folder and run the analysis SQL; print timings as one JSON line."""
    sys.path.insert(0, str(ROOT))
    from nsight_analyze.ingest.run import ingest
    from nsight_analyze.store.workspace import open_workspace

    t0 = time.perf_counter()  # the workspace is created, loaded and analysed inside the ingest
    report = ingest([folder], db)
    t_ingest = time.perf_counter() - t0
    failed = [f"{o.path.name}: {o.message}" for o in report.outcomes if o.status != "ok"]
    load_s = sum(o.seconds for o in report.outcomes)
    result = {
        "ingest_s": t_ingest,
        "load_s": load_s,
        "failed": failed,
        "ingest_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    con = open_workspace(db, read_only=True)
    result["kernels"] = con.execute("SELECT count(*) FROM kernels").fetchone()[0]
    result["gpu_ops"] = result["kernels"] + con.execute("SELECT count(*) FROM memops").fetchone()[0]
    con.close()
    if analyse:
        for name, analysis in ANALYSES.items():  # each on a fresh connection: nothing cached
            con = open_workspace(db, read_only=True)
            t = time.perf_counter()
            timer = threading.Timer(sql_timeout, con.interrupt)
            timer.start()
            try:
                analysis(con)
                result[f"{name}_s"] = time.perf_counter() - t
            except Exception as exc:  # noqa: BLE001 - a broken or slow view is reported, not fatal
                first = str(exc).splitlines()[0][:100]
                timed_out = "nterrupt" in first
                result[f"{name}_s"] = f"timeout > {sql_timeout:.0f} s" if timed_out else f"error: {first}"
            finally:
                timer.cancel()
                con.close()
    print(json.dumps(result))


def bare_read(folder: Path, db: Path) -> None:
    """The baseline: what any DuckDB-based reader of these files pays at the least. Import
    pyarrow (our Kineto reader needs it), read each file's `traceEvents` with DuckDB's own JSON
    reader into a table of a new workspace file, checkpoint; no mapping to canonical tables and
    no analysis. Timed from after `import duckdb`, like our ingest (whose module imports it)."""
    import duckdb

    t0 = time.perf_counter()
    import pyarrow  # noqa: F401

    con = duckdb.connect(str(db))
    events = 0
    # kineto.meta.SUFFIXES and duck.sql_string are not imported: the package's imports would
    # count in the baseline's memory, which must hold only what every such reader pays
    files = sorted(p for p in folder.iterdir() if p.name.endswith((".json", ".json.gz")))
    for i, path in enumerate(files):
        literal = "'" + str(path).replace("'", "''") + "'"
        con.execute(
            f"CREATE TABLE events_{i} AS SELECT unnest(traceEvents, max_depth := 2) "
            f"FROM read_json({literal}, maximum_object_size = {2**31 - 1})"
        )
        events += con.execute(f"SELECT count(*) FROM events_{i}").fetchone()[0]
    con.execute("CHECKPOINT")
    con.close()
    print(json.dumps({"bare_s": time.perf_counter() - t0, "events": events}))


def _breakdown(con) -> None:
    """What HTA's get_temporal_breakdown + get_comm_comp_overlap give: per rank, the whole
    capture's compute / non-compute / idle time and the share of communication hidden under
    compute (tp_breakdown has them per step too)."""
    con.execute(
        "SELECT rank, window_ns, compute_ns, memory_ns, other_ns, comms_exposed_ns, idle_ns, overlap_pct "
        "FROM tp_breakdown WHERE step IS NULL ORDER BY rank"
    ).fetchall()


def _summary(con) -> None:
    """Everything `nsight-analyze summary` computes: the breakdown per rank and step with the
    causes of the idle time (every gap joined to its launch call and the host's ranges), step
    sources and the top kernels."""
    from nsight_analyze.summary import summary

    summary(con)


ANALYSES = {"breakdown": _breakdown, "summary": _summary}


def _tree_pss_kib(root: int) -> int:
    """Summed PSS (RSS where smaps_rollup is absent) of a process and all its descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        for path, key in ((f"/proc/{pid}/smaps_rollup", "Pss:"), (f"/proc/{pid}/status", "VmRSS:")):
            try:
                with open(path) as fh:
                    line = next((ln for ln in fh if ln.startswith(key)), None)
            except OSError:
                continue
            if line is not None:
                total += int(line.split()[1])
                break
    return total


def measure(cmd: list[str]) -> None:
    """Run cmd as a child and print its last JSON line with its peak memory and wall time added."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak_tree = 0
    sampler_done = threading.Event()

    def sample() -> None:
        nonlocal peak_tree
        while not sampler_done.wait(SAMPLE_S):
            peak_tree = max(peak_tree, _tree_pss_kib(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    process_s = time.perf_counter() - started
    sampler_done.set()
    sampler.join()
    if proc.returncode != 0:
        print(json.dumps({"error": (err.strip().splitlines() or [f"exit {proc.returncode}"])[-1]}))
        return
    result = json.loads(out.strip().splitlines()[-1])
    result["maxrss_mib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    result["tree_pss_mib"] = peak_tree / 1024
    result["peak_rss_mib"] = max(result["maxrss_mib"], result["tree_pss_mib"])
    result["process_s"] = process_s  # interpreter start and imports included
    print(json.dumps(result))


def run_measure(cmd: list[str]) -> dict:
    """Measure cmd from an intermediate process, so that RUSAGE_CHILDREN is this command's alone."""
    out = subprocess.run(
        [sys.executable, __file__, "--measure", "--", *cmd], capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def _remove_workspace(db: Path) -> None:
    for f in db.parent.glob(db.name + "*"):
        f.unlink()


def run_ours(folder: Path, db: Path, analyse: bool = True, sql_timeout: float = 60) -> dict:
    _remove_workspace(db)
    flags = ["--sql-timeout", str(sql_timeout)] + ([] if analyse else ["--no-analysis"])
    return run_measure([sys.executable, __file__, "--worker", str(folder), str(db), *flags])


def run_bare(folder: Path, db: Path) -> dict:
    _remove_workspace(db)
    return run_measure([sys.executable, __file__, "--bare", str(folder), str(db)])


def hta_python(option: str | None) -> str | None:
    """The interpreter that runs HTA: --hta-python, else this one when it can import hta."""
    if option:
        return option
    try:
        import hta  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        return None
    return sys.executable


def run_hta(python: str, folder: Path) -> dict:
    return run_measure([python, "-c", HTA_SCRIPT, str(folder)])


def _errors(r: dict) -> str:
    errors = [f"{k}: {v}" for k, v in r.items() if isinstance(v, str) and k.endswith("_s")]
    return (f"  [{errors}]" if errors else "") + (f"  [failed: {r['failed']}]" if r["failed"] else "")


def _seconds(r: dict, key: str) -> float:
    return r[key] if isinstance(r.get(key), float) else float("nan")


def compare_job(
    name: str, job: Path, db: Path, gpu_events: int | None, hta: str | None, timeout: float, bare: bool
) -> None:
    """Ours (ingest with its analysis, then the breakdown read) and HTA on one folder, with ratios."""
    r = run_ours(job, db, sql_timeout=timeout)
    label = f"{name}, ours"
    if "error" in r:
        print(f"{label:>18} failed: {r['error']}")
        return
    total = r["ingest_s"] + _seconds(r, "breakdown_s")
    with_summary = r["ingest_s"] + _seconds(r, "summary_s")
    rate = (gpu_events or r["gpu_ops"]) / r["ingest_s"]
    print(
        f"{label:>18} {r['ingest_s']:>8.1f} {r['load_s']:>7.1f} {_seconds(r, 'breakdown_s'):>11.2f} "
        f"{_seconds(r, 'summary_s'):>9.2f} {total:>8.2f} {r['peak_rss_mib']:>8.0f} "
        f"{rate:>9.0f}  {r['ingest_rss_mib']:>10.0f}{_errors(r)}",
        flush=True,
    )
    b = run_bare(job, db.with_name(db.stem + "_bare.duckdb")) if bare else None
    if b is not None and "error" in b:
        print(f"{'bare read':>18} failed: {b['error']}")
        b = None
    if b is not None:
        print(
            f"{'bare read':>18} {b['bare_s']:>8.2f} {'':>7} {'':>11} {'':>9} {b['bare_s']:>8.2f} "
            f"{b['peak_rss_mib']:>8.0f}   ({b['events']} events; ours: {r['ingest_s'] / b['bare_s']:.2f}x "
            f"its time, {r['peak_rss_mib'] / b['peak_rss_mib']:.2f}x its memory)",
            flush=True,
        )
    if not hta:
        return
    h = run_hta(hta, job)
    label = f"{name}, HTA"
    if "error" in h:
        print(f"{label:>18} failed: {h['error']}")
        return
    hta_total = h["load_s"] + h["analysis_s"]
    print(
        f"{label:>18} {h['load_s']:>8.1f} {'':>7} {h['analysis_s']:>11.2f} {'':>9} "
        f"{hta_total:>8.2f} {h['peak_rss_mib']:>8.0f}"
    )
    memory, ingest_memory = (r[k] / h["peak_rss_mib"] for k in ("peak_rss_mib", "ingest_rss_mib"))
    print(
        f"{'ratio':>18} time {hta_total / total:.2f}x faster (ingest + summary with idle causes "
        f"{hta_total / with_summary:.2f}x; ingest alone vs HTA's load {h['load_s'] / r['ingest_s']:.2f}x), "
        f"memory {memory:.2f} of HTA's (ingest alone {ingest_memory:.2f})",
        flush=True,
    )
    if b is not None:  # the bar "at most half of HTA's time, no more of its memory" against the floor
        print(
            f"{'':>18} the bare read alone takes {b['bare_s'] / hta_total:.2f} of HTA's time and "
            f"{b['peak_rss_mib'] / h['peak_rss_mib']:.2f} of its memory",
            flush=True,
        )
    print(  # what a user waits for: each tool's process from start to exit, imports included
        f"{'':>18} whole process, imports included: ours {r['process_s']:.2f} s (it also counts the rows "
        f"and reads the breakdown and summary), HTA {h['process_s']:.2f} s: "
        f"{h['process_s'] / r['process_s']:.2f}x faster",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--ranks", default="8", help="comma-separated rank counts (default 8; e.g. 8,32,64; 0: none)"
    )
    ap.add_argument("--gpu-events", type=int, default=50_000, help="GPU events per rank (default 50000)")
    ap.add_argument(
        "--big-gpu-events",
        type=int,
        default=250_000,
        help="GPU events of the single large file measured for peak RSS (0: skip)",
    )
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="Kineto trace to tile")
    ap.add_argument(
        "--hta-python",
        help="a Python interpreter with HolisticTraceAnalysis installed "
        "(default: this one, if it can import hta)",
    )
    ap.add_argument(
        "--folders",
        default="",
        help="comma-separated folders of real traces measured as they are (e.g. the shared trace_filter)",
    )
    ap.add_argument("--no-hta", action="store_true", help="do not run HTA")
    ap.add_argument(
        "--no-bare",
        action="store_true",
        help="skip the bare-read baseline (seconds per file: minutes on large sets)",
    )
    ap.add_argument("--keep", type=Path, help="write the tiled files here and keep them")
    ap.add_argument("--worker", nargs=2, type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--bare", nargs=2, type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--no-analysis", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--sql-timeout", type=float, default=120, help="analysis time limit, s (default 120)")
    ap.add_argument("cmd", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(*args.worker, analyse=not args.no_analysis, sql_timeout=args.sql_timeout)
    if args.bare:
        return bare_read(*args.bare)
    if args.measure:
        return measure(args.cmd)
    package_bytecode()  # as installed: no measured process compiles the package (precompile.py)
    if not args.source.exists():
        raise SystemExit(f"source trace {args.source} is absent (../shared/traces)")
    hta = None if args.no_hta else hta_python(args.hta_python)

    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_kineto_"))
    print(f"source: {args.source}  ({os.cpu_count()} CPUs)  files in {tmp}")
    print(f"HTA: {hta or 'not installed: ratios not measured (--hta-python PATH)'}")
    rank_counts = [int(x) for x in args.ranks.split(",") if x and int(x) > 0]
    if rank_counts or args.folders:
        print(
            f"{'':>18} {'ingest s':>8} {'load s':>7} {'breakdown s':>11} {'summary s':>9} {'total s':>8} "
            f"{'RSS MiB':>8} {'GPU ev/s':>9}  {'ingest RSS':>10}\n"
            f"{'':>18} (ingest includes the stored analysis; total = ingest + reading the breakdown; "
            "HTA: load s, analysis s; ratios: HTA time / ours, our RSS / HTA's)"
        )
    body, gpu_per_rank = b"", 0
    if rank_counts:
        t = time.perf_counter()
        body, gpu_per_rank, events_per_rank = tile_body(args.source, args.gpu_events)
        print(
            f"tiled body: {gpu_per_rank} GPU events, {events_per_rank} events per rank, "
            f"{len(body) / 2**20:.1f} MiB gz ({time.perf_counter() - t:.1f} s)"
        )
    jobs = []
    for ranks in rank_counts:
        job = tmp / f"ranks{ranks}"
        write_job(job, ranks, body)
        jobs.append((f"{ranks} ranks", job, ranks * gpu_per_rank, not args.keep))
    for folder in filter(None, args.folders.split(",")):
        jobs.append((Path(folder).name[:12], Path(folder), None, False))
    for name, job, gpu_events, remove in jobs:
        compare_job(
            name, job, tmp / f"{job.name}.duckdb", gpu_events, hta, args.sql_timeout, not args.no_bare
        )
        if remove:
            shutil.rmtree(job, ignore_errors=True)
    if args.big_gpu_events:
        big_body, big_gpu, big_events = tile_body(args.source, args.big_gpu_events)
        job = tmp / "big"
        (path,) = write_job(job, 1, big_body)
        json_bytes = 0
        with gzip.open(path) as fh:
            while chunk := fh.read(1 << 24):
                json_bytes += len(chunk)
        r = run_ours(job, tmp / "big.duckdb", analyse=False)
        gz_mib = path.stat().st_size / 2**20
        print(
            f"large file: 1 rank, {big_gpu} GPU events, {big_events} events, "
            f"{json_bytes / 2**20:.0f} MiB JSON ({gz_mib:.0f} MiB gz): "
            f"ingest {r.get('ingest_s', float('nan')):.1f} s, load {r.get('load_s', float('nan')):.1f} s, "
            f"peak RSS {r.get('peak_rss_mib', float('nan')):.0f} MiB"
            + (f"  [{r['error']}]" if "error" in r else "")
        )
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
