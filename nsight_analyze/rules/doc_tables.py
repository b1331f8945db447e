"""docs/diagnose.md's "Rules" and "Thresholds" tables, written from the findings' declarations.

Why: the tables restated what each rule module declares (ids, thresholds, sources, recoverable
time) and drifted from it; now they are generated, and tests/test_declared_findings.py fails when
the docs are stale. Run `python -m nsight_analyze.rules.doc_tables` (or `make docs`) after changing
a declaration; `--check` only says whether the docs are current.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from . import SPECS, THRESHOLDS

DOC = Path(__file__).resolve().parents[2] / "docs" / "diagnose.md"
BEGIN = (
    "<!-- generated: {name} (python -m nsight_analyze.rules.doc_tables; edit the @finding declarations) -->"
)
END = "<!-- end generated: {name} -->"


def rules_table() -> str:
    """One row per declared finding: id, what, source, recoverable per step."""
    rows = ["| id | what | source | recoverable per step |", "|---|---|---|---|"]
    rows += [f"| {s.label} | {s.doc.what} | {s.doc.source} | {s.doc.recoverable} |" for s in SPECS]
    return "\n".join(rows)


def thresholds_table() -> str:
    """One row per threshold, in the order `diagnose --list-thresholds` prints them."""
    rows = ["| name | default | meaning |", "|---|---|---|"]
    rows += [f"| `{name}` | {t.default:g} | {t.doc} |" for name, t in THRESHOLDS.items()]
    return "\n".join(rows)


TABLES = {"rules": rules_table, "thresholds": thresholds_table}


def updated(text: str) -> str:
    """`text` (docs/diagnose.md) with every generated block rewritten from the declarations."""
    for name, table in TABLES.items():
        begin, end = BEGIN.format(name=name), END.format(name=name)
        block = re.compile(re.escape(begin) + r"\n.*?\n" + re.escape(end), re.S)
        if not block.search(text):
            raise SystemExit(f"{DOC}: no generated block {name!r} (expected a line {begin!r})")
        text = block.sub(lambda _m, t=table, b=begin, e=end: f"{b}\n{t()}\n{e}", text)
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when docs/diagnose.md is stale")
    args = ap.parse_args(argv)
    text = DOC.read_text()
    new = updated(text)
    if args.check:
        if new != text:
            print(f"{DOC} is stale: run python -m nsight_analyze.rules.doc_tables", file=sys.stderr)
            return 1
        return 0
    if new != text:
        DOC.write_text(new)
        print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
