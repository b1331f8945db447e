"""`make bench` writes docs/benchmarks.md's "Latest run" from the benchmarks' output (issue 54 point 5).

The writer (benchmarks/write_doc.py) gets a run as run_all.py records it: a hand-made one here, with
made-up numbers that appear nowhere else, so every one found in the markdown came from the input.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    sys.path.insert(0, str(ROOT / "benchmarks"))  # run_all imports write_doc from beside it
    try:
        spec = importlib.util.spec_from_file_location(f"_bench_{name}", ROOT / "benchmarks" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


write_doc = _load("write_doc")
run_all = _load("run_all")

INGEST_OUT = """   kernels        rows  scan s narrow s  load s  ratio /narrow      rows/s  ingest s
 1,000,000   1,234,567    4.56     3.21   13.68    3.0     4.3      90,246     27.03
"""


def a_run(**changes) -> dict:
    run = {
        "started": "2031-05-06T07:08:09+00:00",
        "seconds": 4321.0,
        "argv": ["--quick"],
        "machine": {
            "platform": "Linux-9.9-x86_64",
            "cpu": "Test CPU 9000",
            "cpus": 12,
            "usable_cpus": 6,
            "memory_gib": 62.5,
            "load": 0.07,
            "python": "3.99.1",
            "duckdb": "7.7.7",
            "nsight_analyze": "0.1.0",
            "commit": "abc1234",
        },
        "results": [
            {
                "name": "bench_ingest.py",
                "command": ".venv/bin/python benchmarks/bench_ingest.py --kernels 100000",
                "status": "ok",
                "seconds": 61.25,
                "output": INGEST_OUT,
            },
            {
                "name": "bench_refresh.py",
                "command": "benchmarks/bench_refresh.py",
                "status": "skipped: needs an ingested workspace (--refresh-workspace W.duckdb)",
            },
            {
                "name": "bench_scale.py",
                "command": ".venv/bin/python benchmarks/bench_scale.py",
                "status": "failed (exit 3)",
                "seconds": 2.5,
                "output": "Traceback (most recent call last):\nValueError: boom\n",
            },
        ],
    }
    run.update(changes)
    return run


def test_the_section_gives_date_machine_commands_and_each_ratios_baseline():
    md = write_doc.render(a_run())
    assert md.startswith(write_doc.BEGIN + "\n## Latest run\n") and md.endswith(write_doc.END + "\n")
    assert "| date | 2031-05-06 07:08 UTC (the run took 1 h 12 min) |" in md
    machine = next(line for line in md.splitlines() if line.startswith("| machine |"))
    for part in (
        "Linux-9.9-x86_64",
        "Test CPU 9000",
        "12 CPUs (6 usable)",
        "62.5 GiB memory",
        "load average 0.07",
    ):
        assert part in machine
    assert "| software | Python 3.99.1 · DuckDB 7.7.7 · nsight-analyze 0.1.0 (commit abc1234) |" in md
    assert "| run | `benchmarks/run_all.py --quick` |" in md
    # one row per benchmark: its status, wall time and what its ratios are measured against
    assert (
        "| [bench_ingest.py](#bench_ingestpy) | ok | 1 min 1 s | `ratio`: the load against a bare sqlite3 "
        "scan of the same columns (`/narrow`: of a few columns) |" in md
    )
    assert (
        "| [bench_scale.py](#bench_scalepy) | failed (exit 3) | 2.5 s | `map x`, `ingest x`: against one"
        in md
    )
    # the skip reason holds a '|'-free text; the row still has its four cells
    refresh_row = next(line for line in md.splitlines() if line.startswith("| [bench_refresh.py]"))
    assert refresh_row.count(" | ") == 3 and "| — |" in refresh_row
    # each command as run, then the benchmark's own table, ratio column included, verbatim
    assert "`.venv/bin/python benchmarks/bench_ingest.py --kernels 100000`: ok, 1 min 1 s." in md
    assert "```text\n" + INGEST_OUT + "```" in md
    assert "`benchmarks/bench_refresh.py`: skipped: needs an ingested workspace" in md
    assert "ValueError: boom" in md


def test_long_output_keeps_its_last_lines():
    lines = [f"line {i}" for i in range(write_doc.MAX_OUTPUT_LINES + 25)]
    run = a_run()
    run["results"] = [{**run["results"][0], "output": "\n".join(lines)}]
    md = write_doc.render(run)
    assert "(the first 25 lines left out)" in md
    assert "line 24\n" not in md and "line 25\n" in md and f"line {len(lines) - 1}\n```" in md


def test_update_replaces_only_the_latest_run_and_keeps_the_earlier_measurements(tmp_path):
    doc = tmp_path / "benchmarks.md"
    intro, earlier = "# Benchmarks\n\nHow to run them.\n\n", "## Earlier measurements\n\nBy hand: 3.0x.\n"
    doc.write_text(intro + earlier)
    write_doc.update(doc, a_run())  # no markers yet: inserted above the earlier measurements
    first = doc.read_text()
    assert first == intro + write_doc.render(a_run()) + "\n" + earlier
    write_doc.update(doc, a_run(started="2032-01-02T03:04:05+00:00"))  # a second run replaces it
    second = doc.read_text()
    assert second.count("## Latest run") == 1 and second.count(write_doc.BEGIN) == 1
    assert "2032-01-02 03:04 UTC" in second and "2031-05-06" not in second
    assert second.startswith(intro) and second.endswith("\n" + earlier)
    assert second == intro + write_doc.render(a_run(started="2032-01-02T03:04:05+00:00")) + "\n" + earlier
    assert not list(tmp_path.glob("*.tmp"))


def test_a_new_page_and_one_without_earlier_measurements(tmp_path):
    doc = tmp_path / "new.md"
    write_doc.update(doc, a_run())
    assert doc.read_text() == write_doc.render(a_run())
    doc.write_text("# Benchmarks\n")
    write_doc.update(doc, a_run())
    assert doc.read_text() == "# Benchmarks\n\n" + write_doc.render(a_run())


def test_the_writer_reads_run_alls_json(tmp_path):
    results, doc = tmp_path / "run.json", tmp_path / "b.md"
    results.write_text(__import__("json").dumps(a_run()))
    assert write_doc.main([str(results), "--doc", str(doc)]) == 0
    assert doc.read_text() == write_doc.render(a_run())


def test_machine_describes_this_one():
    m = write_doc.machine()
    assert m["cpus"] and m["python"].count(".") == 2 and m["duckdb"]


def test_the_committed_page_has_one_section_to_replace_above_the_earlier_measurements():
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    begin, end, earlier = text.find(write_doc.BEGIN), text.find(write_doc.END), text.find(write_doc.EARLIER)
    assert 0 <= begin < end < earlier and text.count(write_doc.BEGIN) == 1


@pytest.mark.parametrize("quick", [False, True])
def test_run_all_commands(quick, tmp_path):
    args = run_all.argparse.Namespace(quick=quick, refresh_workspace=None)
    ingest = run_all.command(ROOT / "benchmarks" / "bench_ingest.py", args)
    assert ingest[1:] == [
        str(ROOT / "benchmarks" / "bench_ingest.py"),
        *(["--kernels", "100000"] if quick else []),
    ]
    refresh = ROOT / "benchmarks" / "bench_refresh.py"
    assert run_all.command(refresh, args).startswith("skipped: needs an ingested workspace")
    args.refresh_workspace = tmp_path / "w.duckdb"
    assert run_all.command(refresh, args)[2] == str(tmp_path / "w.duckdb")
    # every benchmark has its quick sizes
    assert {p.name for p in (ROOT / "benchmarks").glob("bench_*.py")} == set(run_all.QUICK)


def test_run_one_keeps_the_output_in_order_and_the_exit_status(capsys):
    code = "import sys; print('out 1', flush=True); print('err 2', file=sys.stderr, flush=True); sys.exit(3)"
    rc, seconds, output = run_all.run_one([sys.executable, "-c", code])
    assert (rc, output) == (3, "out 1\nerr 2\n") and seconds > 0
    assert capsys.readouterr().out == "out 1\nerr 2\n"  # shown as it came


def test_no_benchmark_matching_only_is_an_error(tmp_path):
    assert run_all.main(["--only", "no-such-benchmark", "--doc", str(tmp_path / "b.md")]) == 2
    assert not (tmp_path / "b.md").exists()
