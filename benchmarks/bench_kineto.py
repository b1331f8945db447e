"""Kineto ingest benchmark: N ranks × M GPU events -> workspace (+ breakdown/overlap SQL).

Why: PyTorch-profiler traces of real jobs are 100 MB to > 1 GB per rank; the ingest must stay
fast (streaming parse, Arrow batches) and bounded in memory (peak RSS must not grow with the
file). This tiles a shared Kineto trace in time until each rank has M GPU events (kernels +
memcpy/memset), writes one gzip file per rank with `distributedInfo.rank` rewritten, then runs
ingest and the analysis SQL in a fresh subprocess and reports wall time and peak RSS (measured
by an intermediate process with resource.getrusage(RUSAGE_CHILDREN), so each size gets its own
peak). HTA (if importable) runs on the same files for a time ratio.

    .venv/bin/python benchmarks/bench_kineto.py                      # 8 ranks + one big file (~2 min)
    .venv/bin/python benchmarks/bench_kineto.py --ranks 8,32,64      # the full matrix
    .venv/bin/python benchmarks/bench_kineto.py --big-gpu-events 2000000   # ~1 GB JSON file

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

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = ROOT.parent / "shared/traces/kineto/hta/trace_filter/sampled_rank-0.json.gz"
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
ID_STRIDE = 10**8  # per-tile offset of correlation / External ids (source ids are < 1e8)

ANALYSIS_SQL = {
    # whole-capture and per-step partition (the headline breakdown)
    "time_partition": (
        "SELECT count(*), sum(window_ns), sum(compute_ns), sum(comms_exposed_ns) FROM time_partition"
    ),
    # compute/NCCL overlap per rank from the partition's companions
    "overlap": (
        "SELECT rank, sum(comms_hidden_ns) * 100.0 / nullif(sum(comms_total_ns), 0) FROM time_partition "
        "WHERE step IS NULL GROUP BY rank"
    ),
    "kernel_summary": "SELECT count(*) FROM kernel_summary",
}


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
    from nsight_analyze.ingest import ingest
    from nsight_analyze.workspace import open_workspace

    open_workspace(db).close()  # schema and views exist before the clock starts
    t0 = time.perf_counter()
    report = ingest([folder], db)
    t_ingest = time.perf_counter() - t0
    failed = [f"{o.path.name}: {o.message}" for o in report.outcomes if o.status != "ok"]
    load_s = sum(o.seconds for o in report.outcomes)
    result = {"ingest_s": t_ingest, "load_s": load_s, "failed": failed,
              "ingest_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    con = open_workspace(db, read_only=True)
    result["kernels"] = con.execute("SELECT count(*) FROM kernels").fetchone()[0]
    result["gpu_ops"] = result["kernels"] + con.execute("SELECT count(*) FROM memops").fetchone()[0]
    if analyse:
        for name, sql in ANALYSIS_SQL.items():
            t = time.perf_counter()
            timer = threading.Timer(sql_timeout, con.interrupt)
            timer.start()
            try:
                con.execute(sql).fetchall()
                result[f"{name}_s"] = time.perf_counter() - t
            except Exception as exc:  # noqa: BLE001 - a broken or slow view is reported, not fatal
                first = str(exc).splitlines()[0][:100]
                timed_out = "nterrupt" in first
                result[f"{name}_s"] = f"timeout > {sql_timeout:.0f} s" if timed_out else f"error: {first}"
            finally:
                timer.cancel()
    con.close()
    print(json.dumps(result))


def measure(folder: Path, db: Path, analyse: bool, sql_timeout: float) -> None:
    """Run the worker as a child; add its peak RSS (RUSAGE_CHILDREN: this process has no other child)."""
    flags = ["--sql-timeout", str(sql_timeout)] + ([] if analyse else ["--no-analysis"])
    cmd = [sys.executable, __file__, "--worker", str(folder), str(db), *flags]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        print(json.dumps({"error": proc.stderr.strip().splitlines()[-1:]}))
        return
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps(result))


def run_measure(folder: Path, db: Path, analyse: bool = True, sql_timeout: float = 60) -> dict:
    for f in db.parent.glob(db.name + "*"):
        f.unlink()
    flags = ["--sql-timeout", str(sql_timeout)] + ([] if analyse else ["--no-analysis"])
    cmd = [sys.executable, __file__, "--measure", str(folder), str(db), *flags]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def hta_seconds(folder: Path) -> float | None:
    try:
        from hta.trace_analysis import TraceAnalysis  # type: ignore[import-not-found]
    except ImportError:
        return None
    t = time.perf_counter()
    analyzer = TraceAnalysis(trace_dir=str(folder))
    analyzer.get_temporal_breakdown(visualize=False)
    analyzer.get_comm_comp_overlap(visualize=False)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="8", help="comma-separated rank counts (default 8; e.g. 8,32,64)")
    ap.add_argument("--gpu-events", type=int, default=50_000, help="GPU events per rank (default 50000)")
    ap.add_argument("--big-gpu-events", type=int, default=250_000,
                    help="GPU events of the single large file measured for peak RSS (0: skip)")
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="Kineto trace to tile")
    ap.add_argument("--keep", type=Path, help="write the tiled files here and keep them")
    ap.add_argument("--worker", nargs=2, type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--measure", nargs=2, type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--no-analysis", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--sql-timeout", type=float, default=60, help="seconds per analysis query (default 60)")
    args = ap.parse_args()
    if args.worker:
        return worker(*args.worker, analyse=not args.no_analysis, sql_timeout=args.sql_timeout)
    if args.measure:
        return measure(*args.measure, analyse=not args.no_analysis, sql_timeout=args.sql_timeout)
    if not args.source.exists():
        raise SystemExit(f"source trace {args.source} is absent (../shared/traces)")

    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench_kineto_"))
    print(f"source: {args.source}  ({os.cpu_count()} CPUs)  files in {tmp}")
    t = time.perf_counter()
    body, gpu_per_rank, events_per_rank = tile_body(args.source, args.gpu_events)
    print(f"tiled body: {gpu_per_rank} GPU events, {events_per_rank} events per rank, "
          f"{len(body) / 2**20:.1f} MiB gz ({time.perf_counter() - t:.1f} s)")
    print(f"{'ranks':>5} {'GPU ev/rank':>11} {'ingest s':>9} {'load s':>7} {'analysis s':>10} "
          f"{'RSS ingest':>10} {'RSS peak':>8} {'GPU ev/s':>9}  HTA   (RSS in MiB)")
    for ranks in [int(x) for x in args.ranks.split(",") if x]:
        job = tmp / f"ranks{ranks}"
        write_job(job, ranks, body)
        r = run_measure(job, tmp / f"ranks{ranks}.duckdb", sql_timeout=args.sql_timeout)
        if "error" in r:
            print(f"{ranks:>5} failed: {r['error']}")
            continue
        analysis = sum(v for k, v in r.items() if k.endswith("_s") and k not in ("ingest_s", "load_s")
                       and isinstance(v, float))
        errors = [f"{k}: {v}" for k, v in r.items() if isinstance(v, str) and k.endswith("_s")]
        hta = hta_seconds(job)
        hta_text = (f"{hta:.1f} s (ratio {hta / (r['ingest_s'] + analysis):.2f}x)" if hta is not None
                    else "not installed: ratio not measured")
        print(f"{ranks:>5} {gpu_per_rank:>11} {r['ingest_s']:>9.1f} {r['load_s']:>7.1f} {analysis:>10.1f} "
              f"{r['ingest_rss_mib']:>10.0f} {r['peak_rss_mib']:>8.0f} "
              f"{ranks * gpu_per_rank / r['ingest_s']:>9.0f}  {hta_text}"
              + (f"  [failed: {r['failed']}]" if r["failed"] else "") + (f"  [{errors}]" if errors else ""))
        if not args.keep:
            for f in job.iterdir():
                f.unlink()
            job.rmdir()
    if args.big_gpu_events:
        big_body, big_gpu, big_events = tile_body(args.source, args.big_gpu_events)
        job = tmp / "big"
        (path,) = write_job(job, 1, big_body)
        json_bytes = 0
        with gzip.open(path) as fh:
            while chunk := fh.read(1 << 24):
                json_bytes += len(chunk)
        r = run_measure(job, tmp / "big.duckdb", analyse=False)
        gz_mib = path.stat().st_size / 2**20
        print(f"large file: 1 rank, {big_gpu} GPU events, {big_events} events, "
              f"{json_bytes / 2**20:.0f} MiB JSON ({gz_mib:.0f} MiB gz): "
              f"ingest {r.get('ingest_s', float('nan')):.1f} s, load {r.get('load_s', float('nan')):.1f} s, "
              f"peak RSS {r.get('peak_rss_mib', float('nan')):.0f} MiB")
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
