"""Rank-parallel ingest: one process vs `--jobs N` vs `--dask local:N`, and the job-level step's
memory as the rank count grows, measured in one run.

1. Generates a synthetic job (default 256 ranks x ~20k kernels each), then ingests it, each in a
   fresh subprocess, with jobs=1, jobs=N and dask=local:N, and prints per mode the wall time of
   the map (reading the files, their canonical rows and rank-local results, landed in the
   workspace: `IngestReport.seconds["load"]` + `["analysis_rank"]`; one process computes the
   rank-local step after loading, workers during the map), of the whole ingest, and the ratios
   against jobs=1. The issue's bar: the map at least 1.7x faster with 2 workers on 2 cores.
   jobs=1 is not one core's worth: it loads the files while a thread computes the rank-local
   step of those landed (rank_pipeline), so it keeps both cores partly busy. The last column
   is therefore the ratio against one Dask worker process (`--dask local:1`), the scaling of
   the workers themselves.
2. Generates small-rank jobs (default 256 and 1024 ranks), ingests each, then recomputes only
   the job-level step (alignment, matching, imbalance, totals) in a fresh subprocess and prints
   its peak RSS; the bar: 1024 ranks at most 1.5x the memory of 256.

    .venv/bin/python benchmarks/bench_scale.py                      # both parts, 2 workers
    .venv/bin/python benchmarks/bench_scale.py --ranks 64 --kernels 20000 --growth 64 256
    .venv/bin/python benchmarks/bench_scale.py --skip-growth --keep /tmp/scale

Run it on an idle machine: the ratios mean nothing when other processes take the cores.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

INGEST = r"""
import json, resource, sys, time
from nsight_analyze.ingest.run import ingest
traces, db, mode, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
started = time.perf_counter()
kw = {"one": {"jobs": 1}, "jobs": {"jobs": workers}, "dask": {"dask": f"local:{workers}"},
      "dask1": {"dask": "local:1"}}[mode]
report = ingest([traces], db, **kw)
assert not report.failed, [o.message for o in report.by_status("failed")]
row = {f"{k}_s": v for k, v in report.seconds.items()}
row.update(total_s=time.perf_counter() - started, files=len(report.by_status("ok")),
           rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
print(json.dumps(row))
"""

JOB_STEP = r"""
import json, resource, sys, time
from nsight_analyze import analysis
from nsight_analyze.store.workspace import open_workspace
con = open_workspace(sys.argv[1], analyse=False)
con.execute("DELETE FROM meta WHERE key = 'analysis_job'")  # only the job step is stale now
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
started = time.perf_counter()
plan = analysis.plan(con)
assert plan.job and not plan.ranks and not plan.full, plan.reason
analysis.refresh(con)
print(json.dumps({"job_step_s": time.perf_counter() - started, "rss_before_mb": before,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "ranks": con.execute("SELECT count(*) FROM ranks").fetchone()[0]}))
"""


def _child(code: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "child failed")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _synth(out: Path, ranks: int, kernels: int, steps: int) -> None:
    if (out / "ground_truth.json").exists() or any(out.glob("*.sqlite")):
        return
    per_step = max(1, kernels // steps)  # the generator writes about as many per step as asked
    subprocess.run(
        [sys.executable, "-m", "nsight_analyze", "synth", str(out), "--ranks", str(ranks),
         "--steps", str(steps), "--kernels-per-step", str(per_step), "--no-truth"],
        check=True, capture_output=True,
    )  # fmt: skip


def parallel(root: Path, ranks: int, kernels: int, workers: int) -> None:
    traces = root / f"t{ranks}x{kernels}"
    _synth(traces, ranks, kernels, steps=20)
    modes = (
        ("one", "one process"),
        ("jobs", f"--jobs {workers}"),
        ("dask", f"--dask local:{workers}"),
        ("dask1", "--dask local:1"),
    )
    rows = {}
    for mode, _ in modes:
        db = root / f"{mode}.duckdb"
        for stale in (db, Path(f"{db}.wal")):
            stale.unlink(missing_ok=True)
        rows[mode] = _child(INGEST, str(traces), str(db), mode, str(workers))
    print(f"\n{ranks} ranks x ~{kernels} kernels, {workers} workers")
    print(
        f"{'mode':<16}{'map s':>9}{'job s':>8}{'ingest s':>10}{'map x':>8}{'ingest x':>10}{'client MB':>11}"
        f"{'map x 1 worker':>16}"
    )
    for r in rows.values():
        r["map_s"] = r["load_s"] + r.get("analysis_rank_s", 0.0)
    base, one_worker = rows["one"], rows["dask1"]
    for mode, label in modes:
        r = rows[mode]
        print(
            f"{label:<16}{r['map_s']:>9.1f}{r.get('analysis_job_s', 0.0):>8.1f}{r['total_s']:>10.1f}"
            f"{base['map_s'] / r['map_s']:>8.2f}{base['total_s'] / r['total_s']:>10.2f}{r['rss_mb']:>11.0f}"
            f"{one_worker['map_s'] / r['map_s']:>16.2f}"
        )


def growth(root: Path, sizes: list[int]) -> None:
    print("\njob-level step alone (small ranks: 2 steps x ~60 kernels)")
    print(f"{'ranks':>7}{'seconds':>9}{'peak MB':>9}{'x first':>9}")
    first = None
    for ranks in sizes:
        traces = root / f"g{ranks}"
        _synth(traces, ranks, 120, steps=2)  # ~60 kernels per step
        db = root / f"g{ranks}.duckdb"
        if not db.exists():
            _child(INGEST, str(traces), str(db), "jobs", "2")
        r = _child(JOB_STEP, str(db))
        first = first or r["rss_mb"]
        print(f"{r['ranks']:>7}{r['job_step_s']:>9.1f}{r['rss_mb']:>9.0f}{r['rss_mb'] / first:>9.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=256)
    ap.add_argument("--kernels", type=int, default=20_000, help="kernels per rank (about)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--growth", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--skip-parallel", action="store_true")
    ap.add_argument("--skip-growth", action="store_true")
    ap.add_argument("--keep", type=Path, default=None, help="folder for the generated traces (reused)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        if not args.skip_parallel:
            parallel(root, args.ranks, args.kernels, args.workers)
        if not args.skip_growth:
            growth(root, args.growth)


if __name__ == "__main__":
    main()
