"""`summary`, `ranks`, `whatif`, `comms`, `gpus`, `info`, `mfu`, `diagnose`, `classify` and `sql`'s
table import no heavy module (`compare` only numpy), and the renderers print a PlainTable as they
print a DataFrame.

Why (issue 15, "no fixed cost a user can feel"): importing pandas (with numpy and pyarrow) costs
about half a second, as much as the whole `summary` command may take on a two-rank workspace.
These commands build their rows with DuckDB's `fetchall` and render `PlainTable`s; the others
(report) still hand DataFrames to the same renderers, which must then
give the very same text.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys

import pandas as pd
import pytest
from conftest import ROOT, TRACES, requires_shared

from nsight_analyze.render.data import records, to_json
from nsight_analyze.render.markdown import markdown_table
from nsight_analyze.render.output import emit
from nsight_analyze.render.table import PlainTable
from nsight_analyze.render.terminal import render_table

HEAVY = ("pandas", "pyarrow", "numpy", "plotly", "scipy")

# Runs the CLI in this interpreter, then prints which heavy modules it left in sys.modules.
_PROBE = """
import sys
from nsight_analyze.cli import main
try:
    main(sys.argv[1:], prog_name="nsight-analyze")
except SystemExit as exc:
    code = exc.code
else:
    code = 0
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
print("HEAVY=" + ",".join(heavy), file=sys.stderr)
sys.exit(code)
"""


@pytest.fixture(scope="module")
def summary_db(sample_workspace):
    """The sample job (4 ranks, NVTX steps), analysed: opening it recomputes nothing (a recompute
    may import anything; the promise is about an up-to-date workspace)."""
    from nsight_analyze import analysis
    from nsight_analyze.store.workspace import open_workspace

    con = open_workspace(sample_workspace)  # refreshes once if the queries changed since the ingest
    try:
        assert not analysis.plan(con).needed
    finally:
        con.close()
    return sample_workspace


@pytest.mark.parametrize(
    "command",
    [
        "summary --format table --by rank",
        "summary --format json --by rank",
        "summary --format csv --by rank",
        "summary --format markdown --by rank",
        "summary --format table --by step",
        "summary --format json --by rank-step",
        *(f"ranks --format {fmt}" for fmt in ("table", "json", "csv", "markdown")),
        *(f"whatif --format {fmt}" for fmt in ("table", "json", "csv", "markdown")),
        "whatif --steps",
        *(f"comms --format {fmt}" for fmt in ("table", "json", "csv", "markdown")),
        "comms --by communicator",
        "comms --by collective --format csv",
        *(f"gpus --format {fmt}" for fmt in ("table", "json", "csv", "markdown")),
        "gpus --all-precisions --gpu H100",
        "gpus --list-models",
        *(f"info --format {fmt}" for fmt in ("table", "json", "markdown")),
        *(f"mfu --format {fmt}" for fmt in ("table", "json", "csv", "markdown")),
        "mfu --gpu H100 --model-flops-per-step 1e15",
        "mfu --params 7e9 --tokens-per-step 4096 --peak-tflops 300",
        *(f"diagnose --format {fmt}" for fmt in ("table", "json", "csv", "markdown")),
        "diagnose --list-thresholds",
        *(f"runs --format {fmt}" for fmt in ("table", "json", "csv", "markdown")),
        'sql select*from"ranks"',  # (no spaces: the command is split on them)
        'sql select*from"kernel_summary" --format markdown --max-rows 3',
    ],
)
def test_reading_commands_import_no_heavy_module(summary_db, command):
    args = [*command.split(), "--db", str(summary_db)]
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=HEAVY), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "100"},
        cwd=summary_db.parent,  # the package as installed, not as found in the current folder
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()  # it printed its result
    line = [x for x in proc.stderr.splitlines() if x.startswith("HEAVY=")]
    assert line == ["HEAVY="], proc.stderr


@pytest.mark.parametrize("how", ["--by-subcategory", "--list-other --format json"])
def test_classify_imports_no_heavy_module(summary_db, tmp_path, how):
    # classify writes the workspace (the categories are stored): on a copy of the sample job
    db = tmp_path / "w.duckdb"
    db.write_bytes(summary_db.read_bytes())
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=HEAVY), "classify", *how.split(), "--db", str(db)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()
    assert [x for x in proc.stderr.splitlines() if x.startswith("HEAVY=")] == ["HEAVY="], proc.stderr


def _ingest_counts(tmp_path, traces, heavy: tuple[str, ...], count_sql: str, *options: str) -> int:
    """Ingest `traces` in a fresh interpreter, assert it printed its closing table and left the
    `heavy` modules unimported; returns `count_sql`'s count on the new workspace."""
    db = tmp_path / "w.duckdb"
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=heavy), "ingest", str(traces), "--db", str(db), *options],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "ranks in the workspace" in proc.stdout  # the closing table was printed
    assert [x for x in proc.stderr.splitlines() if x.startswith("HEAVY=")] == ["HEAVY="], proc.stderr
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(count_sql).fetchone()[0]


def test_nsys_ingest_binds_no_parameter_and_prints_without_pandas(tmp_path):
    """An ingest of nsys exports (the sample job's four ranks: a complete job, so the what-if
    replay runs) leaves pandas and pyarrow unimported: it binds no Python parameter (DuckDB
    imports pandas before binding one), calls no Python function from SQL (DuckDB imports pandas
    and pyarrow to call one: the replay runs between two queries, nsight_analyze/replay.py),
    reads no DataFrame and prints its closing table from a PlainTable. 0.2-0.3 s and 100 MB
    of a 3 s ingest (320 -> 222 MB peak RSS)."""
    traces = tmp_path / "traces"
    traces.mkdir()
    for src in sorted((ROOT / "sample_traces").glob("*.sqlite")):  # not ground_truth.json: Kineto
        (traces / src.name).write_bytes(src.read_bytes())
    heavy = ("pandas", "pyarrow", "plotly", "scipy")
    # the replay ran (asked for at ingest: it is computed on first read otherwise): what-if rows
    what_if = "SELECT count(*) FROM whatif WHERE step IS NOT NULL"
    assert _ingest_counts(tmp_path, traces, heavy, what_if, "--analyze", "all") > 0


@requires_shared
def test_kineto_ingest_imports_no_pandas(tmp_path):
    """An ingest of PyTorch-profiler traces (the shared HTA trace_filter pair) leaves pandas
    unimported: the fast path splits DuckDB's Arrow tables with pyarrow compute against Arrow
    scalars DuckDB made (pyarrow imports pandas to convert any Python value) and hands them back
    as Arrow streams (DuckDB imports pandas to register a Python object). 0.4 s and 50 MB of a
    two-second ingest; pyarrow itself stays (the fast path is Arrow)."""
    traces = TRACES / "kineto" / "hta" / "trace_filter"
    # the fast path loaded the kernels
    assert _ingest_counts(tmp_path, traces, ("pandas", "plotly", "scipy"), "SELECT count(*) FROM kernels") > 0


@pytest.mark.parametrize("fmt", ["json", "table", "markdown"])
def test_compare_runs_without_scipy_or_pandas(summary_db, fmt):
    # scipy is the statistics' test oracle, not a dependency (compare/stats.py): a comparison
    # with its p-values and findings must neither import it nor need it installed. Nor does it
    # import pandas (half a second of a comparison), pyarrow or plotly; numpy it needs (the
    # bootstrap). Its findings come from diagnose, run in a thread beside the comparison: a
    # pandas import in one thread broke the other's rules when pandas was still imported.
    args = ["compare", str(summary_db), str(summary_db), "--format", fmt]
    blocked = "import sys; sys.modules['scipy'] = None\n" + _PROBE.format(
        heavy=("pandas", "pyarrow", "plotly")
    )
    proc = subprocess.run(
        [sys.executable, "-c", blocked, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "100"},
        cwd=summary_db.parent,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY=\n" in proc.stderr, proc.stderr
    if fmt == "json":
        doc = json.loads(proc.stdout)
        assert doc["step_time"]["slowest"]["p_value"] is not None
        assert doc["findings"]["available"], doc["notes"]
        assert not [n for n in doc["notes"] if "rule failed" in n], doc["notes"]


# Rows a command could hand a renderer: integer ids and counts, durations and shares (floats,
# some missing), text with trace-like hostile characters, a long kernel name, booleans, a column
# that is always missing, and one of integers with a gap (pandas makes it float: 3.0 prints "3").
ROWS = [
    {
        "rank": 0,
        "name": "void gemm<128, 64>(Params) | `x` [a](b) " + "k" * 60,
        "window_ns": 299848812,
        "idle_pct": 8.681,
        "overlap_pct": None,
        "instances": 1289,
        "ok": True,
        "note": "first\nline \x1b[31m<b>&",
        "never": None,
        "gapped": 3,
    },
    {
        "rank": 1,
        "name": "ncclDevKernel_SendRecv",
        "window_ns": 0,
        "idle_pct": float("nan"),
        "overlap_pct": 51.89385589860161,
        "instances": 7,
        "ok": False,
        "note": "",
        "never": None,
        "gapped": None,
    },
    {
        "rank": 12,
        "name": "elementwise",
        "window_ns": 1234,
        "idle_pct": 0.056,
        "overlap_pct": 0.0,
        "instances": 1_000_000,
        "ok": True,
        "note": "12.5 ms",
        "never": None,
        "gapped": 41,
    },
]
# Columns of one type each (with missing values): their CSV and JSON agree as well; "gapped"
# does not (pandas writes its integers as 3.0, a PlainTable keeps 3).
TYPED = [c for c in ROWS[0] if c != "gapped"]


@pytest.mark.parametrize("width", [30, 80, 200])
def test_terminal_text_same_for_dataframe_and_plain_table(width):
    plain, df = PlainTable.from_records(ROWS), pd.DataFrame(ROWS)
    for keys in (1, 2):
        assert render_table(plain, "t", width=width, keys=keys) == render_table(
            df, "t", width=width, keys=keys
        )


def test_markdown_same_for_dataframe_and_plain_table():
    plain, df = PlainTable.from_records(ROWS), pd.DataFrame(ROWS)
    assert markdown_table(plain, "t") == markdown_table(df, "t")
    assert markdown_table(plain, units_by_column=False) == markdown_table(df, units_by_column=False)


def _emitted(table, fmt: str) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        emit(table, fmt, "title")
    return buf.getvalue()


@pytest.mark.parametrize("fmt", ["table", "json", "csv", "markdown"])
def test_emit_same_for_dataframe_and_plain_table(fmt):
    rows = [{c: r[c] for c in TYPED} for r in ROWS]
    assert _emitted(PlainTable.from_records(rows), fmt) == _emitted(pd.DataFrame(rows), fmt)


def test_records_keep_types_and_missing_values():
    rows = [{c: r[c] for c in TYPED} for r in ROWS]
    got = records(PlainTable.from_records(rows))
    assert got == records(pd.DataFrame(rows))
    # by hand from ROWS: ints stay ints, NaN and None are null
    assert [type(r["instances"]) for r in got] == [int, int, int]
    assert got[1]["idle_pct"] is None and got[0]["overlap_pct"] is None
    assert json.loads(to_json(got))[1]["idle_pct"] is None


def test_plain_csv_quotes_like_pandas():
    """Commas, quotes, newlines and a lone empty field: the csv module's minimal quoting, as pandas'."""
    rows = [{"a": 'x,"y"', "b": "two\nlines"}, {"a": "", "b": None}]
    assert PlainTable.from_records(rows).to_csv() == pd.DataFrame(rows).to_csv(index=False)
    one = [{"a": None}, {"a": ""}, {"a": float("nan")}]
    assert PlainTable.from_records(one).to_csv() == pd.DataFrame(one).to_csv(index=False)


def test_numeric_columns_as_pandas_types_them():
    """Right-aligned columns follow the DataFrame's dtypes: numbers with gaps are numeric, bools,
    text and all-missing columns are not."""
    plain, df = PlainTable.from_records(ROWS), pd.DataFrame(ROWS)
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    want = [is_numeric_dtype(t) and not is_bool_dtype(t) for t in df.dtypes]
    assert [plain.is_numeric(i) for i in range(len(plain.columns))] == want
    assert want.count(True) == 6  # by hand: rank, window_ns, idle_pct, overlap_pct, instances, gapped


def test_fetchall_timestamps_are_the_iso_text_pandas_gave():
    # `info` reads its rows with fetchall (datetime values) where it read DataFrames (pandas
    # Timestamps): the JSON and the cells must read the same; the oracle is pandas' own isoformat
    import datetime

    from nsight_analyze.plain import jsonable

    for value in (datetime.datetime(2026, 12, 6, 3, 0), datetime.datetime(2026, 12, 6, 3, 0, 0, 123456)):
        assert jsonable(value) == pd.Timestamp(value).isoformat()
        assert json.loads(to_json({"at": value})) == {"at": pd.Timestamp(value).isoformat()}
    assert jsonable(datetime.date(2026, 12, 6)) == "2026-12-06"
