"""Write the "Latest run" section of docs/benchmarks.md from a `make bench` run.

`benchmarks/run_all.py` calls `update(doc, run)` once every benchmark has run; by hand:

    .venv/bin/python benchmarks/run_all.py --json run.json --no-doc   # run, keep the results
    .venv/bin/python benchmarks/write_doc.py run.json                 # write them into the doc

`run` is a dict: `started` (ISO 8601, UTC), `seconds` (the whole run), `argv` (run_all's own
options), `machine` (what `machine()` returns) and `results`, one dict per benchmark: `name`
(bench_x.py), `command` (as a user types it), `status` ("ok", "failed (exit N)" or
"skipped: why"), `seconds` and `output` (its stdout and stderr, in order).

Each benchmark measures its baseline in the same run and prints the ratio against it (a bare scan,
one process, HTA, a full recompute: `BASELINES` says which); the section gives each command, that
baseline and the benchmark's printed tables, whose ratio columns are the numbers to compare. Only
the text between the two markers is replaced: the hand-written "Earlier measurements" below stay.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from datetime import datetime
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks.md"
BEGIN = (
    "<!-- latest-run: written by `make bench` (benchmarks/write_doc.py); edits up to /latest-run are lost -->"
)
END = "<!-- /latest-run -->"
EARLIER = "## Earlier measurements"
MAX_OUTPUT_LINES = 60  # of each benchmark's output, the last ones (its result tables come last)

# What each benchmark's ratios are measured against, in the same run (from their docstrings).
BASELINES = {
    "bench_analysis.py": "each phase's `x scan`: bare DuckDB fetching `SELECT * FROM kernels` to Arrow",
    "bench_big_rank.py": "`x scan`: a bare sqlite3 scan of the kernel and CUDA API rows' columns; "
    "`nsys stats -r gpukernsum,cudaapisum` when nsys is installed",
    "bench_ingest.py": "`ratio`: the load against a bare sqlite3 scan of the same columns "
    "(`/narrow`: of a few columns)",
    "bench_kineto.py": "ingest + breakdown against HTA's load + breakdown + overlap, "
    "and the bare read (DuckDB's JSON reader alone)",
    "bench_merger.py": "none: phase times against the whole analysis' 20 s budget",
    "bench_refresh.py": "one changed rank's refresh against a full recompute of the same workspace",
    "bench_report.py": "none: size and `report` time against their budgets (15 MB, 2 s)",
    "bench_runs.py": "`x scan`: a bare DuckDB median step per run (one GROUP BY of time_partition "
    "joined to ranks), in process and in a new process; the command against issue 55's 2 s",
    "bench_scale.py": "`map x`, `ingest x`: against one process (jobs=1); "
    "`map x 1 worker`: against `--dask local:1`",
    "bench_synth.py": "none: the generator's time per phase",
}


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024**2
    except (OSError, ValueError, IndexError):
        pass
    return None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def machine() -> dict:
    """The machine and software a run measured: platform, CPUs, memory, versions, load at start."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count()
    try:
        load = round(os.getloadavg()[0], 2)
    except OSError:
        load = None
    memory = _memory_gib()
    return {
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
        "usable_cpus": usable,
        "memory_gib": round(memory, 1) if memory is not None else None,
        "load": load,
        "python": platform.python_version(),
        "duckdb": _version("duckdb"),
        "nsight_analyze": _version("nsight-analyze"),
        "commit": _commit(),
    }


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _when(started: str) -> str:
    stamp = datetime.fromisoformat(started)
    return stamp.strftime("%Y-%m-%d %H:%M") + (" UTC" if stamp.utcoffset() is not None else "")


def _machine_line(m: dict) -> str:
    cpus = f"{m.get('cpus')} CPUs"
    if m.get("usable_cpus") not in (None, m.get("cpus")):
        cpus += f" ({m['usable_cpus']} usable)"
    parts = [m.get("platform"), m.get("cpu"), cpus]
    if m.get("memory_gib") is not None:
        parts.append(f"{m['memory_gib']} GiB memory")
    if m.get("load") is not None:
        parts.append(f"load average {m['load']} at the start")
    return " · ".join(str(p) for p in parts if p)


def _software_line(m: dict) -> str:
    parts = [f"Python {m.get('python')}", f"DuckDB {m.get('duckdb') or 'unknown'}"]
    version = f"nsight-analyze {m.get('nsight_analyze') or 'unknown'}"
    if m.get("commit"):
        version += f" (commit {m['commit']})"
    return " · ".join([*parts, version])


def _output_block(output: str) -> list[str]:
    lines = output.rstrip().splitlines()
    if not lines:
        return ["(no output)"]
    head = []
    if len(lines) > MAX_OUTPUT_LINES:
        head = [f"(the first {len(lines) - MAX_OUTPUT_LINES} lines left out)"]
        lines = lines[-MAX_OUTPUT_LINES:]
    return [*head, "```text", *(line.replace("```", "'''") for line in lines), "```"]


def render(run: dict) -> str:
    """The section, markers included, as markdown."""
    m = run.get("machine", {})
    options = " ".join(run.get("argv") or [])
    out = [
        BEGIN,
        "## Latest run",
        "",
        "What `make bench` measured last; each benchmark measured its baseline in the same run. Compare "
        "ratios, not times, with other machines (they differ by up to 4x between sessions).",
        "",
        "| | |",
        "|---|---|",
        f"| date | {_when(run['started'])} (the run took {_duration(run.get('seconds'))}) |",
        f"| machine | {_cell(_machine_line(m))} |",
        f"| software | {_cell(_software_line(m))} |",
        f"| run | `benchmarks/run_all.py{' ' + options if options else ''}` |",
        "",
        "| benchmark | status | wall time | ratio against |",
        "|---|---|---|---|",
    ]
    for r in run["results"]:
        baseline = BASELINES.get(r["name"], "see the benchmark's docstring")
        out.append(
            f"| [{r['name']}](#{_anchor(r['name'])}) | {_cell(r['status'])} | "
            f"{_duration(r.get('seconds'))} | {_cell(baseline)} |"
        )
    for r in run["results"]:
        out += ["", f"### {r['name']}", "", f"`{r['command']}`: {r['status']}"]
        if not r["status"].startswith("skipped"):
            out[-1] += f", {_duration(r.get('seconds'))}."
            out += ["", *_output_block(r.get("output", ""))]
    out.append(END)
    return "\n".join(out) + "\n"


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but - and _ dropped, spaces to -."""
    kept = "".join(c for c in heading.lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def splice(text: str, section: str) -> str:
    """text with its latest-run section replaced by section (or inserted above the earlier ones)."""
    start, end = text.find(BEGIN), text.find(END)
    if start >= 0 and end > start:
        tail = text[end + len(END) :]  # from the newline after the marker: the spacing stays
        return text[:start] + section.rstrip("\n") + (tail or "\n")
    at = text.find(EARLIER)
    if at >= 0:
        return text[:at] + section + "\n" + text[at:]
    return (text.rstrip("\n") + "\n\n" if text.strip() else "") + section


def update(doc: Path, run: dict) -> None:
    """Write run's section into doc (created when missing), atomically."""
    text = doc.read_text() if doc.exists() else ""
    new = splice(text, render(run))
    tmp = doc.with_name(doc.name + ".tmp")
    tmp.write_text(new)
    tmp.replace(doc)


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, help="the JSON that `run_all.py --json FILE` wrote")
    ap.add_argument(
        "--doc", type=Path, default=DOC, help=f"the page to update (default {DOC.relative_to(ROOT)})"
    )
    args = ap.parse_args(argv)
    update(args.doc, json.loads(args.results.read_text()))
    print(f"wrote the latest run into {args.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
