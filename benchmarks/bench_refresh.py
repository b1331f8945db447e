"""A partial recompute: one rank of an ingested workspace changed, then `analysis.refresh`.

Why: a re-ingest of a few files (or rows changed with SQL) makes only their ranks stale; the
refresh should cost in proportion to what changed, not to the job. This copies a workspace,
deletes every other `cuda_api` row of one rank (its fingerprint changes, nothing else), and times
the refresh in a fresh process: its rank-local and job steps, the close (checkpoint), and the peak
RSS. The baseline in the same run is a full recompute of the same copy (`refresh(force=True)`).

    .venv/bin/python benchmarks/bench_refresh.py WORKSPACE [--rank 5]

A workspace of 64 ranks x 200k kernels: `nsight-analyze synth DIR --ranks 64 --steps 200
--kernels-per-step 1000 --no-truth`, then `nsight-analyze ingest DIR --db W.duckdb`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
from nsight_analyze import analysis
from nsight_analyze.store.workspace import open_workspace
db, rank, force = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "full"
con = open_workspace(db, analyse=False)
if not force:
    con.execute("DELETE FROM cuda_api WHERE rank = ? AND correlation_id % 2 = 0", [rank])
    plan = analysis.plan(con)
    assert plan.ranks == [rank] and not plan.full, plan.reason
seconds = {}
started = time.perf_counter()
analysis.refresh(con, force=force, seconds=seconds)
refresh = time.perf_counter() - started
con.close()
print(json.dumps({"refresh_s": refresh, "rank_s": seconds.get("rank", 0.0), "job_s": seconds.get("job", 0.0),
                  "with_close_s": time.perf_counter() - started,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run(db: Path, rank: int, mode: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(db), str(rank), mode], capture_output=True, text=True
    )
    if out.returncode != 0:
        raise SystemExit(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "child failed")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workspace", type=Path)
    ap.add_argument("--rank", type=int, default=5, help="the rank whose rows change (default 5)")
    args = ap.parse_args()
    if not args.workspace.is_file():
        raise SystemExit(f"no workspace at {args.workspace}")
    print(f"{'':<22}{'refresh s':>10}{'rank s':>8}{'job s':>8}{'+close s':>10}{'peak MB':>9}")
    with tempfile.TemporaryDirectory(dir=args.workspace.parent) as tmp:
        copy = Path(tmp) / "w.duckdb"
        for mode, label in (("one", f"rank {args.rank} changed"), ("full", "full recompute")):
            shutil.copyfile(args.workspace, copy)  # each from the same state
            r = run(copy, args.rank, mode)
            print(
                f"{label:<22}{r['refresh_s']:>10.1f}{r['rank_s']:>8.1f}{r['job_s']:>8.1f}"
                f"{r['with_close_s']:>10.1f}{r['peak_mb']:>9.0f}"
            )


if __name__ == "__main__":
    main()
