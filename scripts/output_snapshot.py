"""Fingerprints of every JSON output on the sample and the shared traces (issue 54's restructuring
check: "every JSON output is byte-identical before and after").

Why: a restructuring must not change a single answer. This ingests the bundled sample and every
shared trace (each alone, as a new user would), runs each command that writes JSON, and writes
one line per (trace, command; also `compare` of the sample against it and its `export
--format chrome-trace` file): the SHA-256 of its output, so two runs (before and after a
change) compare with `diff`. Two things vary between runs of the same code and are normalised
before hashing: the workspace's path (in notes and errors) and the last digits of a float (a sum
of many terms depends on the order DuckDB's threads add them in): floats are written to 12
significant digits; and `info`'s ingest time (`ingested_at`) is left out.

    .venv/bin/python scripts/output_snapshot.py --work /tmp/snap-a > before.txt
    ... change ...
    .venv/bin/python scripts/output_snapshot.py --work /tmp/snap-b > after.txt
    diff before.txt after.txt
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

from click.testing import CliRunner

from nsight_analyze.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / "shared" / "traces"
COMMANDS = (
    ("summary",),
    ("summary", "--by", "step"),
    ("ranks",),
    ("diagnose",),
    ("comms",),
    ("whatif",),
    ("mfu",),
    ("gpus",),
    ("classify",),
    ("info",),
    ("runs",),
)


def inputs() -> list[tuple[str, Path]]:
    found = [("sample", ROOT / "sample_traces")]
    if TRACES.is_dir():
        for f in sorted((TRACES / "nsys").rglob("*.sqlite")):
            found.append((str(f.relative_to(TRACES)), f))
        for f in sorted((TRACES / "kineto").rglob("*.json*")):
            found.append((str(f.relative_to(TRACES)), f))
    return found


def _rounded(value: object) -> object:
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items() if k != "ingested_at"}
    return value


def fingerprint(output: str, work: Path) -> str:
    """SHA-256 (16 hex digits) of a command's output, paths and float noise normalised."""
    text = output.replace(str(work), "<WORK>").replace(str(ROOT), "<ROOT>")  # the checkout's path
    try:
        text = json.dumps(_rounded(json.loads(text)))
    except ValueError:  # an error line or a partial output: hashed as text
        pass
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, required=True, help="folder for the workspaces")
    ap.add_argument("--only", action="append", help="substring of the trace names to keep (repeatable)")
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    runner = CliRunner()
    os.environ.setdefault("NO_COLOR", "1")
    sample = a.work / "w0.duckdb"  # what compare compares each input with, kept or not by --only
    if not sample.exists():
        runner.invoke(cli_main, ["ingest", str(inputs()[0][1]), "--db", str(sample), "-q"])
    for i, (name, path) in enumerate(inputs()):
        if a.only and not any(o in name for o in a.only):
            continue
        db = a.work / f"w{i}.duckdb"
        if not db.exists():
            r = runner.invoke(cli_main, ["ingest", str(path), "--db", str(db), "-q"])
            if r.exit_code != 0 or not db.exists():
                print(f"{name}\tingest\texit {r.exit_code}")
                continue
        for cmd in COMMANDS:
            r = runner.invoke(cli_main, [*cmd, "--db", str(db), "--format", "json"])
            # stdout: the JSON; stderr holds progress ("computing ...", which depends on what an
            # earlier command computed), and the error line when the command fails
            digest = fingerprint(r.stdout if r.exit_code == 0 else r.stdout + r.stderr, a.work)
            print(f"{name}\t{' '.join(cmd)}\texit {r.exit_code}\t{digest}", flush=True)
        for what, args, out in (
            # compare's document: the sample (the first input) against this input
            ("compare sample", ["compare", str(sample), str(db), "--format", "json"], None),
            (
                "export chrome-trace",
                ["export", "--format", "chrome-trace", "--force", "--db", str(db)],
                "trace.json",
            ),
        ):
            target = a.work / f"w{i}.{out}" if out else None
            r = runner.invoke(cli_main, [*args, *([str(target)] if target else [])])
            text = target.read_text() if target and r.exit_code == 0 else r.stdout
            digest = fingerprint(text if r.exit_code == 0 else text + r.stderr, a.work)
            print(f"{name}\t{what}\texit {r.exit_code}\t{digest}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
