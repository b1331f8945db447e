"""`make bench`: run every benchmark in benchmarks/, one after another, then write what they printed
into the "Latest run" section of docs/benchmarks.md (benchmarks/write_doc.py).

Each benchmark runs with its default sizes (minutes each; run it on an idle machine: the ratios mean
nothing when other processes take the cores), or with --quick at the smallest sizes that still
measure something (a check that every benchmark runs, not numbers to compare). Its output is shown
as it comes and kept for the doc. bench_refresh.py needs an ingested workspace: --refresh-workspace.

    .venv/bin/python benchmarks/run_all.py                          # as `make bench`
    .venv/bin/python benchmarks/run_all.py --quick --only synth --doc /tmp/bench.md
    .venv/bin/python benchmarks/run_all.py --refresh-workspace w64.duckdb --json run.json
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import write_doc  # noqa: E402  (beside this file, not a package)

# The smallest sizes at which each benchmark still measures its baseline and ratios.
QUICK = {
    "bench_analysis.py": ["--sizes", "4", "--steps", "20"],
    "bench_big_rank.py": ["--kernels", "200000"],
    "bench_ingest.py": ["--kernels", "100000"],
    "bench_kineto.py": ["--ranks", "2", "--gpu-events", "5000", "--big-gpu-events", "0"],
    "bench_merger.py": ["--ranks", "8", "--kernels", "20000"],
    "bench_refresh.py": [],
    "bench_report.py": ["--ranks", "8", "--kernels", "20000", "--cli-runs", "1"],
    "bench_runs.py": ["--runs", "10", "--repeat", "2"],
    "bench_scale.py": ["--ranks", "16", "--kernels", "2000", "--growth", "16", "64"],
    "bench_synth.py": ["--ranks", "8", "--steps", "20"],
}


def _shown(path: str) -> str:
    """path relative to the repository when it lies inside it (the command as a user types it)."""
    try:
        return str(Path(path).relative_to(ROOT))
    except ValueError:
        return path


def command(script: Path, args: argparse.Namespace) -> list[str] | str:
    """The benchmark's command line, or why it is skipped."""
    extra = QUICK.get(script.name, []) if args.quick else []
    if script.name == "bench_refresh.py":
        if args.refresh_workspace is None:
            return "skipped: needs an ingested workspace (--refresh-workspace W.duckdb)"
        extra = [str(args.refresh_workspace.resolve()), *extra]
    return [sys.executable, str(script), *extra]


def run_one(cmd: list[str]) -> tuple[int, float, str]:
    """Run cmd from the repository root, echoing its output as it comes; its exit status, wall time
    and output (stderr merged into stdout, in the order written)."""
    started = time.perf_counter()
    lines = []
    with subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line)
    return proc.returncode, time.perf_counter() - started, "".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--quick", action="store_true", help="the smallest sizes (a check, not numbers to compare)"
    )
    ap.add_argument(
        "--only", action="append", default=[], metavar="NAME", help="run the benchmarks whose name holds NAME"
    )
    ap.add_argument(
        "--refresh-workspace", type=Path, default=None, help="the workspace bench_refresh.py changes"
    )
    ap.add_argument("--doc", type=Path, default=write_doc.DOC, help="the page to write the latest run into")
    ap.add_argument("--no-doc", action="store_true", help="write no page")
    ap.add_argument("--json", dest="json_out", type=Path, default=None, help="also write the results as JSON")
    args = ap.parse_args(argv)

    scripts = [
        s for s in sorted(HERE.glob("bench_*.py")) if not args.only or any(n in s.name for n in args.only)
    ]
    if not scripts:
        print(f"no benchmark matches {', '.join(args.only)}", file=sys.stderr)
        return 2
    own = list(sys.argv[1:] if argv is None else argv)
    run = {
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "argv": own,
        "machine": write_doc.machine(),
        "results": [],
    }
    t0 = time.perf_counter()
    failed = []
    for script in scripts:
        print(f"\n=== {script.name} ===", flush=True)
        cmd = command(script, args)
        if isinstance(cmd, str):
            print(cmd)
            run["results"].append({"name": script.name, "command": _shown(str(script)), "status": cmd})
            continue
        shown = shlex.join([_shown(cmd[0]), _shown(cmd[1]), *cmd[2:]])
        rc, seconds, output = run_one(cmd)
        status = "ok" if rc == 0 else f"failed (exit {rc})"
        if rc != 0:
            failed.append(script.name)
        run["results"].append(
            {"name": script.name, "command": shown, "status": status, "seconds": seconds, "output": output}
        )
    run["seconds"] = time.perf_counter() - t0

    if args.json_out:
        args.json_out.write_text(json.dumps(run, indent=2) + "\n")
    if not args.no_doc:
        write_doc.update(args.doc, run)
        print(f"\nwrote the latest run into {_shown(str(args.doc.resolve()))}")
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
