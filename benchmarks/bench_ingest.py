"""Ingest speed and memory against a bare SQLite scan of the same rows, measured in one run.

Builds one synthetic rank export with N kernels (plus the runtime calls, copies and NVTX
ranges the generator makes alongside them), then, each in a fresh subprocess:
  - scan: a bare full scan through Python's sqlite3 of every column the ingest reads from
    the event tables (SELECT max(start), max("end"), ... FROM CUPTI_ACTIVITY_KIND_KERNEL,
    RUNTIME, MEMCPY, NVTX_EVENTS): the same rows and the same values, with nothing done to them;
  - narrow: the same scan restricted to a few columns per table (the issue's example
    `SELECT sum(start), sum("end"), ...`), a stricter yardstick, printed for comparison;
  - ingest: `nsight_analyze.ingest.run.ingest` into a new workspace (imports included).
Prints rows/s and the ratios load/scan and load/narrow, where load is the ingest until its rows
have landed (imports, `IngestReport.seconds` "prepare" and "load"; the stored analysis computed
after and the closing checkpoint left out: the scan does none of that), the whole ingest's
time, and the peak RSS of each.

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

# Every column nsys_sqlite reads from each event table (the columns a file lacks are left out).
FULL = {
    "CUPTI_ACTIVITY_KIND_KERNEL": (
        "globalPid deviceId streamId start end demangledName shortName correlationId gridX gridY gridZ "
        "blockX blockY blockZ registersPerThread staticSharedMemory dynamicSharedMemory graphId graphNodeId"
    ),
    "CUPTI_ACTIVITY_KIND_RUNTIME": "globalTid start end nameId correlationId returnValue eventClass",
    "CUPTI_ACTIVITY_KIND_MEMCPY": (
        "globalPid deviceId streamId start end copyKind bytes srcKind dstKind correlationId graphNodeId"
    ),
    "NVTX_EVENTS": "globalTid start end eventType textId text domainId jsonTextId jsonText",
}
NARROW = {
    "CUPTI_ACTIVITY_KIND_KERNEL": (
        "start end deviceId streamId correlationId demangledName shortName gridX blockX"
    ),
    "CUPTI_ACTIVITY_KIND_RUNTIME": "start end globalTid correlationId nameId",
    "CUPTI_ACTIVITY_KIND_MEMCPY": "start end bytes correlationId copyKind",
    "NVTX_EVENTS": "start end eventType textId",
}

CHILD = r"""
import json, sqlite3, sys, time
from pathlib import Path
mode, trace, db = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
scan = json.loads(sys.argv[4])
t = time.perf_counter()
if mode == "scan":
    con = sqlite3.connect(f"{trace.as_uri()}?mode=ro&immutable=1", uri=True)
    rows = 0
    for table, wanted in scan.items():
        present = {c[1] for c in con.execute(f'PRAGMA table_info("{table}")')}
        cols = ", ".join(f'max("{c}")' for c in wanted.split() if c in present)  # max: no overflow
        if cols:
            rows += con.execute(f"SELECT count(*), {cols} FROM {table}").fetchone()[0]
else:
    from nsight_analyze.ingest.run import ingest
    imports = time.perf_counter() - t
    report = ingest([trace], db)
    assert report.outcomes[0].status == "ok", report.outcomes
    rows = sum(report.outcomes[0].counts.values())
seconds = time.perf_counter() - t
# the rows landed: imports, hashing and probing while the workspace opens, the load
load = seconds if mode == "scan" else imports + report.seconds["prepare"] + report.seconds["load"]
# VmHWM, not ru_maxrss: Linux carries a parent's high-water mark into ru_maxrss across exec.
hwm_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(json.dumps({"seconds": seconds, "load": load, "rows": rows, "rss_mb": hwm_kb / 1024}))
"""


def measure(mode: str, trace: Path, db: Path, scan: dict | None = None) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(trace), str(db), json.dumps(scan or {})],
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
        f"{'kernels':>10} {'rows':>11} {'scan s':>7} {'narrow s':>8} {'load s':>7} {'ratio':>6} "
        f"{'/narrow':>7} {'rows/s':>11} {'ingest s':>9} {'scan MB':>8} {'ingest MB':>9}\n"
        f"{'':>10} (load: the ingest up to its rows landed, imports included; ratio, /narrow and "
        "rows/s are of it; ingest: with the stored analysis computed after)"
    )
    for n in args.kernels:
        with tempfile.TemporaryDirectory() as tmp:
            trace = build(Path(tmp) / "traces", n)
            full = measure("scan", trace, Path(tmp) / "unused", FULL)
            narrow = measure("scan", trace, Path(tmp) / "unused", NARROW)
            run = measure("ingest", trace, Path(tmp) / "w.duckdb")
            print(
                f"{n:>10,} {run['rows']:>11,} {full['seconds']:>7.2f} {narrow['seconds']:>8.2f} "
                f"{run['load']:>7.2f} {run['load'] / full['seconds']:>6.1f} "
                f"{run['load'] / narrow['seconds']:>7.1f} {run['rows'] / run['load']:>11,.0f} "
                f"{run['seconds']:>9.2f} {full['rss_mb']:>8.0f} {run['rss_mb']:>9.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
