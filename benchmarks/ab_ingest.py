"""Two source trees' ingest of the same input, interleaved: medians of wall and CPU seconds.

Usage: .venv/bin/python benchmarks/ab_ingest.py BEFORE AFTER [--input DIR] [--rounds N]

BEFORE and AFTER are folders holding an `nsight_analyze/` and a `queries/` (a copy of the
repository before a change, and the repository). Each round runs one ingest per tree, each in a
fresh interpreter, the order alternating; what is timed is the `ingest()` call (imports it
makes inside included, like benchmarks/bench_kineto.py's), wall and CPU (user + system, every
thread). Why interleaved and CPU too: on a machine shared with other work the wall time of one
run drifts by seconds; the CPU time and the alternating order keep a comparison honest.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_INPUT = ROOT.parent / "shared" / "traces" / "kineto" / "hta" / "trace_filter"

CHILD = r"""
import json, os, resource, sys, time
sys.path.insert(0, sys.argv[1])
from nsight_analyze.ingest.run import ingest
import nsight_analyze
assert nsight_analyze.__file__.startswith(sys.argv[1]), nsight_analyze.__file__
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
ingest([sys.argv[3]], sys.argv[2])
wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall": wall, "cpu": r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime}))
"""


def run_once(tree: Path, db: Path, source: Path) -> dict:
    """One ingest of `source` into a new `db` with the package of `tree`, in a fresh interpreter."""
    for old in (db, Path(f"{db}.wal")):
        old.unlink(missing_ok=True)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(tree), str(db), str(source)], capture_output=True, text=True
    )
    if out.returncode:
        raise SystemExit(f"{tree}: the ingest failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--input", type=Path, default=DEFAULT_INPUT, help="the traces (default: trace_filter)")
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="ab_ingest_") as tmp:
        for i in range(args.rounds):
            for name in list(trees) if i % 2 == 0 else list(reversed(trees)):
                runs[name].append(run_once(trees[name], Path(tmp) / f"{name}.duckdb", args.input))
    for name, rs in runs.items():
        wall, cpu = [r["wall"] for r in rs], [r["cpu"] for r in rs]
        print(
            f"{name:>6}: wall median {statistics.median(wall):.3f} s (min {min(wall):.3f}), "
            f"CPU median {statistics.median(cpu):.3f} s (min {min(cpu):.3f}), {len(rs)} runs  [{trees[name]}]"
        )


if __name__ == "__main__":
    main()
