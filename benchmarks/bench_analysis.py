"""Time ingest + the partition views + summary on synthetic jobs of growing size.

Usage: .venv/bin/python benchmarks/bench_analysis.py [--sizes 8,32,64] [--steps 200]
       [--kernels-per-step 1000] [--work DIR]

For every size (ranks) it generates a job with nsight_analyze.synth (not timed), then runs the
ingest and the analysis each in a fresh process, so that peak RSS is per phase. Analysis =
materialize() (steps, sweep, gaps: the shared intermediates) + every view of the partition
(time_partition, gaps, launch_stats, sync_calls, steps) read in full + summary(). Prints wall time,
CPU time and peak RSS per phase and size, and the growth against the previous size.
Goal (issue 4): 64 ranks x 200k kernels analysed within 20 s on 2 cores, under 4 GB.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VIEWS = ("steps", "time_partition", "gaps", "launch_stats", "sync_calls")


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def phase_ingest(traces: Path, db: Path) -> dict:
    from nsight_analyze.ingest import ingest

    t0, c0 = time.perf_counter(), _cpu()
    ingest([traces], db)
    return {"wall_s": time.perf_counter() - t0, "cpu_s": _cpu() - c0, "peak_mib": _peak_mib()}


def phase_analysis(db: Path) -> dict:
    from nsight_analyze.summary import materialize, summary
    from nsight_analyze.workspace import open_workspace

    con = open_workspace(db, read_only=True)
    con.execute("SET enable_progress_bar = false")
    t0, c0 = time.perf_counter(), _cpu()
    materialize(con)
    t_mat = time.perf_counter() - t0
    rows = {}
    for view in VIEWS:
        rows[view] = len(con.execute(f"SELECT * FROM {view}").fetchall())
    summary(con, by="rank", refresh=False)
    summary(con, by="step", refresh=False)
    kernels = con.execute("SELECT count(*) FROM kernels").fetchone()[0]
    return {
        "wall_s": time.perf_counter() - t0,
        "cpu_s": _cpu() - c0,
        "materialize_s": t_mat,
        "peak_mib": _peak_mib(),
        "kernels": kernels,
        "rows": rows,
    }


def _run_phase(*args: str) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="8,32,64", help="rank counts, comma-separated")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--kernels-per-step", type=int, default=1000)
    ap.add_argument("--work", type=Path, default=None, help="keep traces and workspaces here (reused)")
    ap.add_argument("--phase", choices=["ingest", "analysis"], help=argparse.SUPPRESS)
    ap.add_argument("--traces", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phase == "ingest":
        print(json.dumps(phase_ingest(args.traces, args.db)))
        return
    if args.phase == "analysis":
        print(json.dumps(phase_analysis(args.db)))
        return

    from nsight_analyze.synth import generate

    work = args.work or Path(tempfile.mkdtemp(prefix="bench_analysis_"))
    prev = None
    try:
        for ranks in [int(s) for s in args.sizes.split(",")]:
            traces = work / f"r{ranks}"
            db = work / f"r{ranks}.duckdb"
            if not any(traces.glob("*.sqlite")):
                t0 = time.perf_counter()
                generate(traces, ranks=ranks, gpus_per_node=8, steps=args.steps,
                         kernels_per_step=args.kernels_per_step, truth=False, vacuum=False)
                print(f"{ranks:>3} ranks: generated in {time.perf_counter() - t0:.1f} s", flush=True)
            if not db.exists():
                ing = _run_phase("--phase", "ingest", "--traces", str(traces), "--db", str(db))
                print(f"{ranks:>3} ranks: ingest   {ing['wall_s']:7.1f} s wall {ing['cpu_s']:7.1f} s CPU "
                      f"peak {ing['peak_mib']:7,.0f} MiB", flush=True)
            ana = _run_phase("--phase", "analysis", "--db", str(db))
            growth = ""
            if prev:
                growth = (f"  growth x{ana['wall_s'] / prev['wall_s']:.2f} time for "
                          f"x{ana['kernels'] / prev['kernels']:.2f} kernels")
            print(f"{ranks:>3} ranks: analysis {ana['wall_s']:7.1f} s wall {ana['cpu_s']:7.1f} s CPU "
                  f"peak {ana['peak_mib']:7,.0f} MiB ({ana['kernels']:,} kernels; materialize "
                  f"{ana['materialize_s']:.1f} s){growth}", flush=True)
            prev = ana
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
