"""Ingest speed and memory against a bare SQLite scan of the same rows, measured in one run.

Builds one synthetic rank export with N kernels (plus the runtime calls, copies and NVTX
ranges the generator makes alongside them), then, each in a fresh subprocess:
  - baseline: a bare full scan of the event tables through Python's sqlite3
    (SELECT sum(start), sum("end"), ... FROM CUPTI_ACTIVITY_KIND_KERNEL, RUNTIME, MEMCPY);
  - ingest: `nsight_analyze.ingest.ingest` into a new workspace.
Prints rows/s, the ratio ingest/baseline and the peak RSS of each, for every size.

    .venv/bin/python benchmarks/bench_ingest.py            # 1M and 2M kernels
    .venv/bin/python benchmarks/bench_ingest.py --kernels 1000000 4000000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

SCAN = {
    "CUPTI_ACTIVITY_KIND_KERNEL": 'sum(start), sum("end"), sum(deviceId), sum(streamId), sum(correlationId), '
    "sum(demangledName), sum(shortName), sum(gridX), sum(blockX)",
    "CUPTI_ACTIVITY_KIND_RUNTIME": 'sum(start), sum("end"), sum(globalTid % 1000), sum(correlationId), '
    "sum(nameId)",
    "CUPTI_ACTIVITY_KIND_MEMCPY": 'sum(start), sum("end"), sum(bytes), sum(correlationId), sum(copyKind)',
    "NVTX_EVENTS": 'sum(start), sum("end"), sum(eventType), sum(textId)',
}

CHILD = r"""
import json, sqlite3, sys, time
from pathlib import Path
mode, trace, db = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
scan = json.loads(sys.argv[4])
t = time.perf_counter()
if mode == "baseline":
    con = sqlite3.connect(f"{trace.as_uri()}?mode=ro&immutable=1", uri=True)
    rows = 0
    for table, cols in scan.items():
        con.execute(f"SELECT {cols} FROM {table}").fetchall()
        rows += con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
else:
    from nsight_analyze.ingest import ingest
    report = ingest([trace], db)
    assert report.outcomes[0].status == "ok", report.outcomes
    rows = sum(report.outcomes[0].counts.values())
seconds = time.perf_counter() - t
# VmHWM, not ru_maxrss: Linux carries a parent's high-water mark into ru_maxrss across exec.
hwm_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(json.dumps({"seconds": seconds, "rows": rows, "rss_mb": hwm_kb / 1024}))
"""


def measure(mode: str, trace: Path, db: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(trace), str(db), json.dumps(SCAN)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def build(folder: Path, kernels: int) -> Path:
    from nsight_analyze.synth import generate

    steps = 20
    generate(
        folder, ranks=1, gpus_per_node=1, steps=steps, seed=7, kernels_per_step=kernels // steps, truth=False
    )
    return folder / "report_rank0.sqlite"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, nargs="+", default=[1_000_000, 2_000_000])
    args = parser.parse_args()
    print(
        f"{'kernels':>10} {'rows':>11} {'scan s':>7} {'ingest s':>8} {'ratio':>6} {'rows/s':>11} "
        f"{'scan MB':>8} {'ingest MB':>9}"
    )
    for n in args.kernels:
        with tempfile.TemporaryDirectory() as tmp:
            trace = build(Path(tmp) / "traces", n)
            base = measure("baseline", trace, Path(tmp) / "unused")
            run = measure("ingest", trace, Path(tmp) / "w.duckdb")
            print(
                f"{n:>10,} {run['rows']:>11,} {base['seconds']:>7.2f} {run['seconds']:>8.2f} "
                f"{run['seconds'] / base['seconds']:>6.1f} {run['rows'] / run['seconds']:>11,.0f} "
                f"{base['rss_mb']:>8.0f} {run['rss_mb']:>9.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
