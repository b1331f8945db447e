"""Terminal output: fits COLUMNS, human units, one unknown marker, trace text shown literally,
and `summary --by step` reports the job's step time (the slowest rank), not a sum over ranks.

The real-trace tests read ../shared/traces in place and skip when it is absent.
"""

from __future__ import annotations

import json
import re
import shutil

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import TRACES, requires_shared
from rich.cells import cell_len

from nsight_analyze.cli import main
from nsight_analyze.render.terminal import render_table
from nsight_analyze.render.units import (
    UNKNOWN,
    format_bytes,
    format_duration,
    format_quantity,
    format_value,
    heading,
)

NSYS_TRACE = TRACES / "nsys" / "nsys-ai" / "h100_2gpu_1s.sqlite"  # 2 ranks, whole-capture window
KINETO_JOB = TRACES / "kineto" / "hta" / "trace_filter"  # 2 ranks, 2 ProfilerStep steps
HOSTILE = "[bold red]x[/] [link=http://e.invalid]y[/link] \x1b[31mred "
# Output that must never reach a terminal table: Python's None, float nanoseconds / bytes
# (60528471.46830986), raw nanosecond counts with a unit ('324534733 ns').
LEAKS = [re.compile(r"\bNone\b"), re.compile(r"\d+\.\d{5,}"), re.compile(r"\b\d{5,} ns\b")]
COMMANDS = [
    ["summary"],
    ["summary", "--by", "step"],
    ["summary", "--by", "rank-step"],
    ["ranks"],
    ["diagnose"],
    ["info"],
]


def run(args: list[str], columns: int = 100) -> tuple[int, str, str]:
    res = CliRunner().invoke(main, args, env={"COLUMNS": str(columns)}, catch_exceptions=False)
    return res.exit_code, res.stdout, res.output


def _refresh(con) -> None:
    """Recompute stored analysis results after editing canonical rows (when the layer exists)."""
    try:
        from nsight_analyze.analysis import refresh
    except ImportError:  # views are live: nothing is stored
        return
    refresh(con, force=True)


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory):
    """{name: workspace path} for the real nsys and Kineto jobs, ingested once per module."""
    if not NSYS_TRACE.is_file() or not KINETO_JOB.is_dir():
        pytest.skip("../shared/traces is absent (real traces live beside the project)")
    from nsight_analyze.ingest.run import ingest

    tmp = tmp_path_factory.mktemp("terminal")
    out = {}
    for name, path in (("nsys", NSYS_TRACE), ("kineto", KINETO_JOB)):
        db = tmp / f"{name}.duckdb"
        ingest([path], db)
        out[name] = db
    return out


# ------------------------------------------------------------------------------------------------
# Units and the unknown marker (no traces needed)


def test_human_units():
    assert format_duration(324534733) == "324.5 ms"
    assert format_duration(1_222_847_000) == "1.223 s"
    assert format_duration(850) == "850 ns"
    assert format_duration(12_345) == "12.35 µs"
    assert format_duration(999_960) == "1.000 ms"  # rounding moves to the next unit
    assert format_duration(0) == "0"
    assert format_bytes(60528471.46830986) == "57.72 MiB"
    assert format_bytes(4) == "4 B"
    assert format_quantity(517869876, "ns (all ranks)") == "517.9 ms (all ranks)"
    assert format_quantity(None, "GPUs") == UNKNOWN
    assert format_value(0.0, "device_id") == "0"  # ids are integers, not '0.00'
    assert format_value(4037, "pid") == "4037"
    assert format_value(1682725899264313443, "start_ns") == "1682725899264313443"  # pasteable into SQL
    assert format_value(2258, "kernels") == "2,258"
    for missing in (None, float("nan"), pd.NA):
        assert format_value(missing, "total_ns") == UNKNOWN
    assert heading("wait_suffered_ns") == "wait suffered" and heading("in_use_pct") == "in use %"


def test_table_fits_and_splits():
    df = pd.DataFrame(
        {"rank": [0, 1], "name": ["k" * 300, "void f<int>(float const*, long)"]}
        | {f"part{i}_ns": [123456789, None] for i in range(12)}
    )
    text = render_table(df, title="t", width=60)
    assert max(cell_len(line) for line in text.splitlines()) <= 60
    assert text.count("rank") >= 2  # split into several tables, each repeating the key column
    assert "123.5 ms" in text and UNKNOWN in text and "…" in text


def test_markup_is_literal_in_tables():
    df = pd.DataFrame({"name": [HOSTILE], "total_ns": [5]})
    for tty in (False, True):
        text = render_table(df, title=HOSTILE, width=100, tty=tty)
        assert "[bold red]x[/]" in text and "[link=http://e.invalid]" in text
        assert "\\x1b[31m" in text  # the trace's escape sequence is shown, not executed
        assert "\x1b[31mred" not in text


def test_padded_rows_equal_what_rich_prints(monkeypatch):
    """The rows laid out without rich (cells that fit their column) are rich's own output: random
    tables of names, wide characters, markup-like text, numbers with units, missing values and
    stray spaces, at widths from 20 to 200 columns, rendered both ways. The expected text is
    rich's layout of the whole table (the path every table took before)."""
    import random

    from nsight_analyze.render import terminal

    words = [
        "a",
        "gemm",
        "é",
        "日本",
        "x" * 30,
        "nccl AllReduce",
        "  lead",
        "trail ",
        "0",
        "12.5 ms",
        HOSTILE,
    ]
    names = ["name", "rank", "total_ns", "count", "bytes", "share_pct", "note", "path", "before med"]
    rnd = random.Random(7)
    padded = 0
    table_lines, rich_lines = terminal._table_lines, terminal._rich_lines
    taken: list[int | None] = []  # the body rows rich was asked for (0: the padded path)

    def spy(cols, width, tty, rows=None):
        taken.append(rows)
        return rich_lines(cols, width, tty, rows)

    monkeypatch.setattr(terminal, "_rich_lines", spy)
    for _ in range(600):
        cols = rnd.sample(names, rnd.randint(1, 6))
        rows = [
            [
                None
                if rnd.random() < 0.1
                else rnd.choice([0, 12345, 10**9, 7 * 10**12, -5])
                if c in ("rank", "total_ns", "count", "bytes")
                else rnd.random() * 100
                if c == "share_pct"
                else " ".join(rnd.choice(words) for _ in range(rnd.randint(1, 3)))
                for c in cols
            ]
            for _ in range(rnd.randint(1, 5))
        ]
        df = pd.DataFrame(rows, columns=cols)
        width, tty, keys = rnd.choice([20, 40, 80, 120, 200]), rnd.random() < 0.3, rnd.randint(0, 2)
        taken.clear()
        ours = render_table(df, "t", width=width, tty=tty, keys=keys)
        padded += 0 in taken
        monkeypatch.setattr(terminal, "_table_lines", lambda cols, w, tty: rich_lines(cols, w, tty))
        assert ours == render_table(df, "t", width=width, tty=tty, keys=keys), (cols, rows, width)
        monkeypatch.setattr(terminal, "_table_lines", table_lines)
    assert padded > 200  # most tables took the padded path (the rest wrap, and rich lays them out)


# ------------------------------------------------------------------------------------------------
# Real workspaces


@requires_shared
@pytest.mark.parametrize("columns", [80, 100])
@pytest.mark.parametrize("ws", ["nsys", "kineto"])
def test_output_fits_the_terminal(workspaces, ws, columns):
    for args in COMMANDS:
        code, out, both = run([*args, "--db", str(workspaces[ws])], columns)
        assert code == 0, both
        assert out.strip(), args
        wide = [line for line in out.splitlines() if cell_len(line) > columns]
        assert not wide, (args, columns, wide[:3])
        for leak in LEAKS:
            assert not leak.search(out), (args, leak.pattern, leak.search(out))


@requires_shared
def test_summary_by_step_gives_the_job_step_time(workspaces):
    """The job's step time is the slowest rank's window. Expected values come straight from the
    time_partition view via SQL: max(window_ns) over the ranks of each step, and that rank."""
    import duckdb

    db = workspaces["kineto"]
    code, out, both = run(["summary", "--db", str(db), "--by", "step", "--format", "json"])
    assert code == 0, both
    doc = json.loads(out)
    con = duckdb.connect(str(db), read_only=True)
    try:
        want = {
            int(step): (int(job), int(slowest), int(total), int(ranks))
            for step, job, slowest, total, ranks in con.execute(
                "SELECT step, max(window_ns), arg_max(rank, (window_ns, -rank)), sum(window_ns), count(*) "
                "FROM time_partition WHERE step IS NOT NULL GROUP BY step"
            ).fetchall()
        }
    finally:
        con.close()
    assert len(want) == 2  # ProfilerStep#551, #552
    rows = {r["step"]: r for r in doc["partition"]}
    assert set(rows) == set(want)
    for step, (job, slowest, total, ranks) in want.items():
        row = rows[step]
        assert row["job_step_ns"] == job and row["slowest_rank"] == slowest
        assert row["window_ns"] == total and row["ranks"] == ranks  # unchanged: sums over ranks
        assert job < total  # the bug this guards: a ~600 ms step shown as ~1,200 ms
    # The table shows the job step time (not the sum) and the mean rank's window.
    code, out, both = run(["summary", "--db", str(db), "--by", "step"], columns=200)
    assert code == 0, both
    assert "job step time" in out and "slowest rank" in out and "mean per rank" in out
    for step, (job, _slowest, total, ranks) in want.items():
        line = next(x for x in out.splitlines() if re.match(rf"\s*{step}\s", x))
        assert format_duration(job) in line and format_duration(total / ranks) in line
        assert format_duration(total) not in line
    # Per rank and step: one row each.
    code, out, _ = run(["summary", "--db", str(db), "--by", "rank-step", "--format", "json"])
    assert code == 0 and len(json.loads(out)["partition"]) == sum(w[3] for w in want.values())


@requires_shared
def test_step_pattern_is_stored_and_used(workspaces, tmp_path):
    import duckdb

    db = tmp_path / "copy.duckdb"
    shutil.copy(workspaces["kineto"], db)
    code, out, both = run(["summary", "--db", str(db), "--step-pattern", "(unclosed"])
    assert code == 2 and out == "", both
    assert "not a valid RE2 regex" in both and len(both.strip().splitlines()) == 1
    pattern = r"^## (backward|optimizer) ##"
    code, out, both = run(
        ["summary", "--db", str(db), "--by", "step", "--format", "json", "--step-pattern", pattern]
    )
    assert code == 0, both
    steps = {r["step"] for r in json.loads(out)["partition"]}
    assert len(steps) == 4  # two ranges per ProfilerStep, two steps
    con = duckdb.connect(str(db), read_only=True)
    try:
        stored = con.execute("SELECT value FROM settings WHERE key = 'step_pattern'").fetchone()[0]
    finally:
        con.close()
    assert stored == pattern
    code, out, both = run(["summary", "--db", str(db), "--by", "step", "--format", "json"])
    assert code == 0 and {r["step"] for r in json.loads(out)["partition"]} == steps, both


@requires_shared
def test_hostile_kernel_names_are_printed_literally(workspaces, tmp_path):
    from nsight_analyze.store.workspace import open_workspace

    db = tmp_path / "hostile.duckdb"
    shutil.copy(workspaces["kineto"], db)
    con = open_workspace(db)
    try:
        con.execute("UPDATE kernels SET name = ? || name WHERE name LIKE 'ncclKernel%'", [HOSTILE])
        _refresh(con)
    finally:
        con.close()
    for args in (["summary"], ["diagnose"]):
        code, out, both = run([*args, "--db", str(db)], columns=160)
        assert code == 0, both
        assert "[bold red]x[/]" in out, args  # the top / dominant kernel, shown as written
        assert "\x1b" not in out and "\\x1b[31m" in out, args


def test_ingest_of_a_large_job_closes_with_one_row_per_host(tmp_path):
    """20 ranks, 4 per node (synth's layout): the closing table has 5 host rows, each naming its
    rank range, and fits 80 columns; 16 or fewer ranks keep one row per rank."""
    from nsight_analyze.synth import generate

    traces = tmp_path / "t"
    generate(traces, ranks=20, gpus_per_node=4, steps=2, kernels_per_step=20, truth=False)
    result = CliRunner().invoke(
        main, ["ingest", str(traces), "--db", str(tmp_path / "w.duckdb")], env={"COLUMNS": "80"}
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert any("20 ranks in the workspace, per host" in line for line in lines)
    hosts = [line for line in lines if re.match(r"^\S*node\d+\s", line)]
    assert [h.split()[1] for h in hosts] == ["0-3", "4-7", "8-11", "12-15", "16-19"]
    table = lines[next(i for i, line in enumerate(lines) if "per host" in line) :]
    assert max(cell_len(line) for line in table if not line.startswith("workspace ")) <= 80  # a path may not


@requires_shared
@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_locale_without_utf8_gets_ascii_not_an_error(workspaces, tmp_path, encoding):
    """Before, `summary` and `diagnose` under a non-UTF-8 locale (PYTHONIOENCODING=ascii, a
    latin-1 LANG) stopped with "error: UnicodeEncodeError" at the first µs or —, exit 1. A real
    process: CliRunner's streams are always UTF-8."""
    import os
    import subprocess
    import sys

    from nsight_analyze.store.workspace import open_workspace

    db = tmp_path / "names.duckdb"
    shutil.copy(workspaces["kineto"], db)
    con = open_workspace(db)
    try:  # trace text beyond both encodings: a CJK name and an emoji (outside the BMP)
        con.execute("UPDATE kernels SET name = '核函数_😀_' || name WHERE name LIKE 'ncclKernel%'")
        _refresh(con)
    finally:
        con.close()
    env = {**os.environ, "PYTHONIOENCODING": encoding, "COLUMNS": "200"}
    shown = {}
    for args in (["summary"], ["diagnose"], ["ranks"]):
        res = subprocess.run(
            [sys.executable, "-m", "nsight_analyze", *args, "--db", str(db)],
            capture_output=True, env=env, timeout=120,
        )  # fmt: skip
        assert res.returncode == 0, res.stderr.decode("ascii", "replace")
        shown[args[0]] = res.stdout.decode(encoding)  # strict: every byte is the locale's
    # the name, its characters the encoding lacks written as escapes (as `clean` shows controls)
    assert "\\u6838\\u51fd\\u6570_\\U0001f600_nccl" in shown["summary"]
    if encoding == "ascii":  # our own symbols in ASCII: rank 0's unknown residuals (—) as -
        row0 = r"^ +0 +file1 +device 0 +0 +session-start +- +- "
        assert re.search(row0, shown["ranks"], re.MULTILINE), shown["ranks"]
