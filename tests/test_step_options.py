"""Steps on the command line (issue 16.6): --step-pattern on ingest and the analysis commands,
and compare never weighing periodic "steps" of one capture against another's capture window.

Real inputs: HTA's trace_filter (NVTX `ProfilerStep#N` ranges, README of ../shared/traces) and
pipit's CloverLeaf capture (no step markers; its timesteps are found from a periodic kernel by
default, docs/metrics.md and test_step_detection). Expected values: the settings the command was
given, the NVTX range names in the raw file, and the same compare without periodic steps.
"""

from __future__ import annotations

import gzip
import json
import re

import duckdb
import pytest
from click.testing import CliRunner

from nsight_analyze.cli import main
from tests.conftest import TRACES, requires_shared

pytestmark = requires_shared

TRACE_FILTER = TRACES / "kineto" / "hta" / "trace_filter"
CLOVER = TRACES / "nsys" / "pipit" / "perlmutter-cloverleaf-cuda.sqlite"


def _cli(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout  # JSON on stdout; a recompute note may go to stderr


def _sources(db) -> set[str]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {r[0] for r in con.execute("SELECT DISTINCT source FROM steps").fetchall()}
    finally:
        con.close()


def test_step_pattern_on_ingest_and_diagnose(tmp_path):
    db = tmp_path / "tf.duckdb"
    # a pattern no NVTX range matches: the steps come from elsewhere (optimizer or capture)
    _cli("ingest", "-q", "--db", str(db), "--step-pattern", "^no such range$", str(TRACE_FILTER))
    assert "nvtx" not in _sources(db)
    # the ranges of the raw file that the pattern below names (what the NVTX steps must be)
    with gzip.open(TRACE_FILTER / "sampled_rank-0.json.gz", "rt") as fh:
        names = {e.get("name", "") for e in json.load(fh)["traceEvents"]}
    steps = sorted(int(m.group(1)) for n in names if (m := re.fullmatch(r"ProfilerStep#(\d+)", n)))
    assert steps
    doc = json.loads(
        _cli("diagnose", "--db", str(db), "--step-pattern", "^ProfilerStep#", "--format", "json")
    )
    assert _sources(db) == {"nvtx"}
    assert doc["job"]["steps"] == len(steps)
    # a pattern no range of the file matches is said when it is set (the steps silently came
    # from the next source); one that matches is not
    said = CliRunner().invoke(main, ["summary", "--db", str(db), "--step-pattern", "^ProfilerStep#[a-z]"])
    assert said.exit_code == 0 and "no NVTX range matches it" in said.stderr, said.stderr
    said = CliRunner().invoke(main, ["summary", "--db", str(db), "--step-pattern", "^ProfilerStep#"])
    assert said.exit_code == 0 and "step_pattern set to" in said.stderr, said.stderr
    assert "no NVTX range matches it" not in said.stderr
    con = duckdb.connect(str(db), read_only=True)
    stored = con.execute("SELECT value FROM settings WHERE key = 'step_pattern'").fetchone()[0]
    con.close()
    assert stored == "^ProfilerStep#"
    # an empty pattern matched every range, outer and nested, and was stored without a word
    empty = CliRunner().invoke(main, ["summary", "--db", str(db), "--step-pattern", " "])
    assert empty.exit_code == 2 and "matches every NVTX range" in empty.output, empty.output
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT value FROM settings WHERE key = 'step_pattern'").fetchone()[0] == stored
    con.close()
    bad = CliRunner().invoke(
        main, ["ingest", "-q", "--db", str(tmp_path / "x.duckdb"), "--step-pattern", "(", str(TRACE_FILTER)]
    )
    assert (
        bad.exit_code != 0 and "not a valid RE2 regex" in bad.output and not (tmp_path / "x.duckdb").exists()
    )
    bad = CliRunner().invoke(
        main, ["ingest", "-q", "--db", str(tmp_path / "x.duckdb"), "--step-pattern", "", str(TRACE_FILTER)]
    )
    assert (
        bad.exit_code == 2
        and "matches every NVTX range" in bad.output
        and not (tmp_path / "x.duckdb").exists()
    )


@pytest.mark.slow
def test_compare_ignores_periodic_steps(tmp_path):
    """A side with periodic steps compares exactly as the same capture without them (per capture
    window). CloverLeaf has periodic steps by default; the other side and the reference run have
    them turned off."""
    args = ["compare", "--format", "json"]
    off, other, on = (tmp_path / f"{n}.duckdb" for n in ("off", "other", "on"))
    for db in (off, other):
        _cli("ingest", "-q", "--no-periodic-steps", "--db", str(db), str(CLOVER))
    _cli("ingest", "-q", "--db", str(on), str(CLOVER))
    assert _sources(on) == {"periodic"}  # the precondition: this capture has a periodic kernel
    assert _sources(off) == _sources(other) == {"capture"}
    plain = json.loads(_cli(*args, str(off), str(other)))
    periodic = json.loads(_cli(*args, str(on), str(other)))
    assert periodic["runs"]["before"]["step_source"] == plain["runs"]["before"]["step_source"] == "capture"
    assert periodic["partition"]["total"] == plain["partition"]["total"]
    assert periodic["work_rate"]["delta_pct"] == pytest.approx(plain["work_rate"]["delta_pct"])

    def mags(doc: dict) -> set:
        return {(c["cause"], c["magnitude_before"], c["magnitude_after"]) for c in doc["findings"]["causes"]}

    assert mags(periodic) == mags(plain) and mags(plain)
    assert any("periodic kernel" in n for n in periodic["notes"])
