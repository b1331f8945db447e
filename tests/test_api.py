"""The Python API (nsight_analyze.api): the same numbers as the CLI's `--format json` on the sample
traces, DataFrames or Arrow tables, and `import nsight_analyze` stays light.

Expected values come from two sources, named at each assertion: the CLI's JSON on the same
workspace (the API and the CLI must agree), and sample_traces/ground_truth.json (the generator's
exact values, independent of the analysis).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pyarrow as pa
import pytest
from click.testing import CliRunner
from conftest import ROOT

import nsight_analyze as na
from nsight_analyze.cli import main
from nsight_analyze.errors import UserError
from nsight_analyze.render.data import records, to_json

SAMPLES = ROOT / "sample_traces"
TRUTH = json.loads((SAMPLES / "ground_truth.json").read_text())
PARTS = ["window_ns", "compute_ns", "memory_ns", "other_ns", "comms_exposed_ns", "idle_ns", "input_stall_ns"]


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    """The sample job ingested once through the API (as `nsight-analyze demo` does)."""
    return na.ingest(SAMPLES, db=tmp_path_factory.mktemp("api") / "job.duckdb")


def as_json(obj):
    """An API document as JSON reads it back (integer dict keys become strings)."""
    return json.loads(to_json(obj))


def cli_json(*args: str):
    res = CliRunner().invoke(main, [*args, "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_import_is_light_and_names_are_lazy():
    """`import nsight_analyze` loads neither duckdb nor pandas; na.open is the API's function."""
    code = (
        "import sys, nsight_analyze as na\n"
        "assert not {'duckdb', 'pandas', 'pyarrow'} & set(sys.modules), 'heavy import'\n"
        "assert na.open.__module__ == 'nsight_analyze.api' and na.Workspace.__name__ == 'Workspace'\n"
        "assert callable(na.ingest) and callable(na.compare)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_ingest_and_compare_stay_modules_and_callables():
    """nsight_analyze.ingest / .compare are subpackages too: imported first, they are still callable
    (the API functions), and still the packages the library and its tests import."""
    code = (
        "import nsight_analyze.ingest.run, nsight_analyze.compare\n"
        "import nsight_analyze as na\n"
        "from nsight_analyze import ingest as m\n"
        "from nsight_analyze.ingest.run import ingest as lib\n"
        "assert m is na.ingest and callable(m) and hasattr(m, 'run') and hasattr(na.compare, 'kernels')\n"
        "assert lib.__module__ == 'nsight_analyze.ingest.run' and callable(na.compare)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_open_missing_workspace_is_one_clear_error(tmp_path):
    with pytest.raises(UserError, match="no workspace at"):
        na.open(tmp_path / "nope.duckdb")


def test_partition_matches_cli_and_ground_truth(ws):
    df = ws.partition(by="rank")
    assert isinstance(df, pd.DataFrame)
    doc = cli_json("summary", "--db", str(ws.path))  # source 1: the CLI's JSON
    assert df.to_dict("records") == [{k: r[k] for k in df.columns} for r in doc["partition"]]
    truth = {r["rank"]: r for r in TRUTH["partition"] if r["step"] is None}  # source 2: ground truth
    for row in df.itertuples(index=False):
        assert {p: getattr(row, p) for p in PARTS} == {p: truth[row.rank][p] for p in PARTS}


def test_partition_by_step_matches_cli(ws):
    df = ws.partition(by="step")
    doc = cli_json("summary", "--db", str(ws.path), "--by", "step")
    assert df["job_step_ns"].tolist() == [r["job_step_ns"] for r in doc["partition"]]
    assert df["slowest_rank"].tolist() == [r["slowest_rank"] for r in doc["partition"]]
    assert len(df) == 12  # source: sample_traces/README.md (12 ProfilerStep ranges)
    assert as_json(ws.summary(by="step")) == doc


def test_ranks_match_cli(ws):
    doc = cli_json("ranks", "--db", str(ws.path))
    df = ws.ranks()
    for col in ("rank", "clock_offset_ns", "compute_ns", "wait_suffered_ns", "wait_caused_ns", "times_last"):
        assert df[col].tolist() == [r[col] for r in doc["ranks"]], col
    assert as_json(ws.rank_report()) == doc
    # source: ground_truth.json's straggler (rank 3, injected 20 % slower)
    assert doc["verdict"]["straggler_rank"] == TRUTH["straggler"]["rank"] == 3


def test_collectives_match_cli_and_ground_truth(ws):
    df = ws.collectives()
    doc = cli_json("sql", "--db", str(ws.path), "SELECT * FROM collectives ORDER BY coll_id")
    assert df["start_skew_ns"].tolist() == [r["start_skew_ns"] for r in doc]
    assert df["last_rank"].tolist() == [r["last_rank"] for r in doc]
    assert len(df) == len(TRUTH["collectives"]) == 60  # source: ground_truth.json (5 all-reduces x 12 steps)


def test_findings_match_cli(ws):
    doc = cli_json("diagnose", "--db", str(ws.path))
    df = ws.findings()
    got = df[["rank", "id", "severity", "recoverable_ns_per_step"]].to_dict("records")
    want = [{k: f[k] for k in ("rank", "id", "severity", "recoverable_ns_per_step")} for f in doc["findings"]]
    assert got == want
    assert "input-stall" in set(df["id"])  # source: sample_traces/README.md (30 ms stalls injected)
    assert as_json(ws.diagnosis()["findings"]) == doc["findings"]


def test_mfu_matches_cli(ws):
    doc = cli_json("mfu", "--db", str(ws.path), "--model-flops-per-step", "4e14")
    df = ws.mfu(4e14)
    assert df["mfu"].tolist() == [r["mfu"] for r in doc["per_step"]]
    assert df["window_ns_max"].tolist() == [r["window_ns_max"] for r in doc["per_step"]]
    assert df.attrs["mfu"] == doc["mfu"] and df.attrs["n_gpus"] == doc["n_gpus"] == 4  # 4 ranks: README


def test_top_kernels_limit(ws):
    """limit -1 raised DuckDB's "Binder Error: LIMIT/OFFSET cannot be negative", 2.5 was cut to 2."""
    assert len(ws.top_kernels(0)) == 0
    assert len(ws.top_kernels(1)) == 1
    for bad in (-1, 2.5, "3", True):
        with pytest.raises(ValueError, match="limit must be a whole number >= 0"):
            ws.top_kernels(bad)


def test_bad_arguments_are_refused_before_any_work(ws, tmp_path):
    """Each was accepted or failed late: ncu_peaks('x') returned no rows as if the workspace had
    no counters; ingest(jobs=0) meant "every core" (the CLI refuses --jobs 0); report(FOLDER)
    wrote its temporary file into the folder's parent, then failed with IsADirectoryError."""
    with pytest.raises(UserError, match="unknown precision 'x': choose one of fp64"):
        ws.ncu_peaks(precision="x")
    for jobs in (0, -1, 1.5):
        with pytest.raises(ValueError, match="jobs must be a whole number >= 1"):
            na.ingest(SAMPLES, db=tmp_path / "never.duckdb", jobs=jobs)
    assert not (tmp_path / "never.duckdb").exists()
    folder = tmp_path / "out"
    folder.mkdir()
    with pytest.raises(UserError, match="it is a folder; give the report's file name"):
        ws.report(folder)
    assert list(tmp_path.iterdir()) == [folder] and not list(folder.iterdir())
    with pytest.raises(ValueError, match=r"ranks must be rank numbers .* not \['x'\]"):  # int('x')'s message
        ws.export(tmp_path / "t.json", ranks=["x"])
    with pytest.raises(TypeError, match="the SQL must be a string, not NoneType"):
        ws.sql(None)


def test_sql_dataframe_and_arrow(ws):
    n = cli_json("sql", "--db", str(ws.path), "SELECT count(*) AS n FROM kernels")[0]["n"]
    assert ws.sql("SELECT count(*) AS n FROM kernels")["n"].iloc[0] == n
    table = ws.sql("SELECT rank, count(*) AS n FROM kernels GROUP BY rank ORDER BY rank", arrow=True)
    assert isinstance(table, pa.Table) and sum(table.column("n").to_pylist()) == n
    assert isinstance(ws.partition(arrow=True), pa.Table)
    with pytest.raises(UserError, match="read-only; add --write"):  # read-only unless write=True
        ws.sql("CREATE TABLE t AS SELECT 1")
    with pytest.raises(UserError, match="SQL error"):
        ws.sql("SELECT * FROM no_such_table")
    with pytest.raises(UserError, match="holds no statement"):  # was an AttributeError
        ws.sql("-- nothing")


def test_report_and_compare(ws, tmp_path):
    out = ws.report(tmp_path / "r.html")
    assert out.is_file() and out.read_text().lstrip().lower().startswith("<!doctype html")
    doc = na.compare(ws, ws.path, findings=False)
    res = CliRunner().invoke(
        main,
        ["compare", str(ws.path), str(ws.path), "--no-findings", "--format", "json"],
        catch_exceptions=False,
    )
    cli = json.loads(res.stdout)
    assert as_json(doc["verdict"]) == cli["verdict"] and as_json(doc["step_time"]) == cli["step_time"]
    assert doc["verdict"]["verdict"] == "neutral"  # source: one run compared with itself cannot differ


# Every Workspace method with a CLI twin returns the document that command prints as JSON (the
# CLI's JSON is the expected value: the API and the CLI must agree on the same workspace).
DOCUMENTS = {
    "info": (lambda ws: ws.info(), ["info"]),
    "summary": (lambda ws: ws.summary(), ["summary"]),
    "whatif": (lambda ws: ws.whatif(), ["whatif"]),
    "diagnose": (lambda ws: ws.diagnosis(), ["diagnose"]),
    "mfu": (lambda ws: ws.mfu_summary(model_flops_per_step=4e14), ["mfu", "--model-flops-per-step", "4e14"]),
    "comms": (lambda ws: ws.comms(), ["comms"]),
    "comms-communicator": (lambda ws: ws.comms("communicator"), ["comms", "--by", "communicator"]),
    "comms-collective": (lambda ws: ws.comms("collective"), ["comms", "--by", "collective"]),
    "gpus": (
        lambda ws: {"ranks": records(ws.gpus()), "ncu_files": records(ws.ncu_peaks())},
        ["gpus"],
    ),
}


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_api_documents_equal_the_cli_json(ws, name):
    method, args = DOCUMENTS[name]
    doc = cli_json(args[0], "--db", str(ws.path), *args[1:])
    assert as_json(method(ws)) == doc
    assert doc, name  # not two empty answers


def test_table_methods_equal_the_cli_json(ws):
    summary = cli_json("summary", "--db", str(ws.path))
    assert as_json(records(ws.top_kernels())) == summary["top_kernels"] != []
    classified = cli_json("classify", "--db", str(ws.path))  # re-classifies: same rules, same rows
    assert as_json(records(ws.classify())) == classified
    # source: sample_traces/README.md (compute, memory and NCCL kernels are generated)
    assert {"compute", "memory", "comms"} <= {r["category"] for r in classified}


def test_export_writes_what_the_cli_writes(ws, tmp_path):
    """ws.export and `nsight-analyze export` write the same events (order aside: DuckDB streams
    the batches in any order) and report the same counts."""
    mine = ws.export(tmp_path / "api.json", steps="3:5", ranks=[0, 2])
    res = CliRunner().invoke(
        main,
        ["export", str(tmp_path / "cli.json"), "--format", "chrome-trace", "--steps", "3:5", "--ranks",
         "0,2", "--db", str(ws.path)],
        catch_exceptions=False,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert f"({mine.events:,} events: {mine.counts['kernels']:,} kernels" in res.output
    events = [
        sorted(json.dumps(e, sort_keys=True) for e in json.loads((tmp_path / f).read_text())["traceEvents"])
        for f in ("api.json", "cli.json")
    ]
    assert events[0] == events[1] and len(events[0]) == mine.events
    parquet = ws.export(tmp_path / "pq", format="parquet", ranks="1")
    assert (tmp_path / "pq" / "manifest.json").is_file() and parquet.rows > 0
    with pytest.raises(UserError, match="chrome-trace only"):
        ws.export(tmp_path / "pq2", format="parquet", steps="1:2")
