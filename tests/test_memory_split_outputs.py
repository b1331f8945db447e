"""Memory shown as its two parts, memory-bound kernels and copies, in every output past `summary`:
compare's JSON, tables and HTML diff, and the HTML report (partition table, bars, timeline).

Oracles: the synthetic generator's ground truth (synth/truth.py computes memory_kernels_ns,
copies_ns and copies_total_ns per window from the generated events, in numpy; tests/
test_idle_causes_2026.py checks the stored partition against it), TraceLens' gpu_timeline.csv for
the SGLang trace (exposed and total memcpy time), and counts of the raw memops / kernels rows.
"""

from __future__ import annotations

import csv
import re
from statistics import fmean

import pytest
from conftest import TRACES, copy_workspace, requires_shared

from nsight_analyze.partition import MEMORY_PARTS

SPLIT = ("memory_kernels_ns", "copies_ns", "copies_total_ns")
SGLANG = TRACES / "kineto/tracelens/inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz"
TRACELENS_SGLANG = TRACES / "oracles/tracelens/tracelens__inference__sglang_prefilldecode/perf_csvs"


@pytest.fixture(scope="module")
def jobs(synth_job):
    """Two small synthetic jobs (the shapes test_compare_stored.py uses: generated once per run)."""
    before = synth_job((), ranks=2, gpus_per_node=2, steps=6, seed=11)
    after = synth_job(["straggler=1:+30"], ranks=2, gpus_per_node=2, steps=6, seed=12)
    return before, after


@pytest.fixture(scope="module")
def result(jobs):
    from nsight_analyze.compare import compare

    return compare(jobs[0].db, jobs[1].db, findings=False)


def _truth_means(truth: dict) -> dict[int, dict[str, float]]:
    """Per rank, the mean over its step windows of each partition column (generator truth): what
    compare reports per rank ("ns per step window, mean over the rank's windows")."""
    rows = [r for r in truth["partition"] if r["step"] is not None]
    return {
        rank: {c: fmean(r[c] for r in rows if r["rank"] == rank) for c in ("memory_ns", "window_ns", *SPLIT)}
        for rank in sorted({r["rank"] for r in rows})
    }


def test_compare_json_has_the_memory_split_of_the_generator_truth(jobs, result):
    part = result["partition"]
    assert part["memory_parts"] == list(MEMORY_PARTS) == ["memory_kernels_ns", "copies_ns"]
    assert "memory_ns" in part["parts"]  # the total stays, beside its split
    for side, job in zip(("before", "after"), jobs, strict=True):
        want = _truth_means(job.truth)
        got = {p["rank"]: p[side] for p in part["per_rank"]}
        assert set(got) == set(want)
        for rank, w in want.items():
            for col in SPLIT:
                assert got[rank][col] == pytest.approx(w[col], rel=1e-12), (side, rank, col)
            assert got[rank]["memory_kernels_ns"] + got[rank]["copies_ns"] == pytest.approx(
                got[rank]["memory_ns"], rel=1e-12
            )
        # the copies are there (the workload's HtoD and DtoH copies), so the split is not vacuous
        assert all(w["copies_total_ns"] > 0 and w["memory_kernels_ns"] > 0 for w in want.values())
        total = part["total"][side]
        for col in SPLIT:  # total = sum over the common ranks
            assert total[col] == pytest.approx(sum(w[col] for w in want.values()), rel=1e-12)
    for col in SPLIT:
        assert part["total"]["delta"][col] == pytest.approx(
            part["total"]["after"][col] - part["total"]["before"][col], abs=1e-6
        )


def test_compare_tables_name_memory_kernels_and_copies(jobs, result):
    from nsight_analyze.commands.compare import markdown, sections

    tables = dict(sections(result, 10))
    rows = {r["part"]: r for r in tables["Time partition, ms per step window summed over ranks"].records()}
    want = {c: sum(w[c] for w in _truth_means(jobs[0].truth).values()) for c in ("memory_ns", *SPLIT)}
    for label, col in (
        ("memory (kernels + copies)", "memory_ns"),
        ("memory kernels", "memory_kernels_ns"),
        ("copies", "copies_ns"),
        ("copies incl. hidden", "copies_total_ns"),
    ):
        assert rows[label]["before_ms"] == pytest.approx(want[col] / 1e6, rel=1e-12), label
    per_rank = tables["Time partition per rank, ms per step window"].records()
    deltas = {p["rank"]: p["delta"] for p in result["partition"]["per_rank"]}
    for r in per_rank:
        assert r["memory_kernels_delta_ms"] == pytest.approx(deltas[r["rank"]]["memory_kernels_ns"] / 1e6)
        assert r["copies_delta_ms"] == pytest.approx(deltas[r["rank"]]["copies_ns"] / 1e6)
    text = markdown(result, 10)
    assert "| memory kernels |" in text and "| copies |" in text and "| memory (kernels + copies) |" in text


def test_compare_html_shows_memory_kernels_and_copies_apart(result):
    from nsight_analyze.render import palette
    from nsight_analyze.render.compare_html import partition_figure, render

    fig = partition_figure(result)
    names = [t["name"] for t in fig["data"]]
    assert "memory kernels" in names and "copies" in names and "memory" not in names
    colour = {t["name"]: t["marker"]["color"] for t in fig["data"]}
    assert colour["memory kernels"] != colour["copies"] == palette.CATEGORY["copies"]
    # the bars tile each window: stacked, they add up to the window (ms), memory as two bars
    groups = [*result["partition"]["per_rank"], result["partition"]["total"]]
    sums = [sum(t["y"][i] for t in fig["data"]) for i in range(2 * len(groups))]
    windows = [g[side]["window_ns"] / 1e6 for g in groups for side in ("before", "after")]
    assert sums == pytest.approx(windows, rel=1e-9)
    page = render(result)
    table = page.split('<table id="partition">', 1)[1].split("</table>", 1)[0]
    cells = dict(re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td>", table))
    total = result["partition"]["total"]["before"]
    for label, col in (("memory kernels", "memory_kernels_ns"), ("copies", "copies_ns")):
        assert cells[label] == f"{total[col] / 1e6:,.3f}"
    assert "memory (kernels + copies)" in cells and "copies incl. hidden" in cells


def test_compare_memory_split_of_a_stale_workspace_is_unknown(jobs, tmp_path):
    """A side whose stored partition lacks the split (made before it, and not brought up to date:
    compare reads the stored table as it is) reports it as unknown, never 0, and the HTML still
    tiles the bars with memory as one part."""
    import duckdb

    from nsight_analyze.compare import compare_prepared
    from nsight_analyze.render.compare_html import partition_figure, render

    stale = copy_workspace(jobs[0].db, tmp_path / "stale.duckdb")
    con = duckdb.connect(str(stale))
    for col in SPLIT:
        con.execute(f"ALTER TABLE time_partition DROP COLUMN {col}")
    con.close()
    r = compare_prepared(stale, jobs[1].db, [], findings=False)
    for block in [*(p["before"] for p in r["partition"]["per_rank"]), r["partition"]["total"]["before"]]:
        assert all(block[c] is None for c in SPLIT) and block["memory_ns"] > 0
    assert all(r["partition"]["total"]["delta"][c] is None for c in SPLIT)
    assert r["partition"]["total"]["after"]["copies_ns"] > 0  # after's own split is still known
    names = [t["name"] for t in partition_figure(r)["data"]]
    assert "memory" in names and "copies" not in names
    assert 'id="partition"' in render(r)  # no NaN reaches the figure JSON


def test_report_partition_table_and_timeline_show_copies_apart(jobs):
    from nsight_analyze.api.outputs import render_report
    from nsight_analyze.report_doc.timeline import build
    from nsight_analyze.store.workspace import open_workspace

    job = jobs[0]
    con = open_workspace(job.db, read_only=True)
    try:
        html = render_report(con)
        table = html.split('id="partition-table"', 1)[1].split("</table>", 1)[0]
        head = table.split("</thead>", 1)[0]
        for header in ("memory (kernels + copies)", "memory kernels", "copies", "copies incl. hidden"):
            assert f"<th>{header}</th>" in head
        want = {r["rank"]: r for r in job.truth["partition"] if r["step"] is None}  # whole capture
        for row, inner in re.findall(r'<tr data-row="([^"]*)">(.*?)</tr>', table):
            got = dict(re.findall(r'data-key="([^"]*)" data-value="([^"]*)"', inner))
            for col in ("memory_ns", *SPLIT):
                assert int(got[col]) == want[int(row)][col], (row, col)
        tl = build(con)
        t0, t1 = tl.window
        series = tl.payload["series"]
        # copies are a series of their own on the memory row: every memcpy / memset (none is a
        # peer copy here) overlapping the window, and memory holds the memory kernels alone
        copies = con.execute(
            "SELECT count(*) FROM aligned_memops WHERE kind <> 'PtoP' AND aligned_end_ns > ? "
            "AND aligned_start_ns < ?",
            [t0, t1],
        ).fetchone()[0]
        kernels = con.execute(
            "SELECT count(*) FROM aligned_kernels WHERE category = 'memory' AND aligned_end_ns > ? "
            "AND aligned_start_ns < ?",
            [t0, t1],
        ).fetchone()[0]
    finally:
        con.close()
    assert copies > 0 and len(series["copies"]["s"]) == copies
    assert len(series["memory"]["s"]) == kernels > 0
    rows = tl.payload["rows"]
    assert {lane % len(rows) for lane in series["copies"]["lane"]} == {rows.index("memory")}


@pytest.fixture(scope="module")
def sglang(tmp_path_factory):
    from nsight_analyze.ingest.run import ingest

    db = tmp_path_factory.mktemp("sglang") / "ws.duckdb"
    ingest([SGLANG], db)
    return db


@requires_shared
def test_sglang_report_and_compare_say_memory_is_kernels_not_copies(sglang):
    """TraceLens (gpu_timeline.csv): 0.038 ms of memcpy, all of it exposed, in a 987 ms timeline;
    the memory part is norms, activations and KV-cache stores. The report's table and compare's
    JSON (the trace against itself, one window: no steps) carry those copies, not a memory share
    that reads as copying."""
    from nsight_analyze.api.outputs import render_report
    from nsight_analyze.compare import compare
    from nsight_analyze.store.workspace import open_workspace

    timeline = {
        r["type"]: float(r["time ms"]) for r in csv.DictReader((TRACELENS_SGLANG / "gpu_timeline.csv").open())
    }
    con = open_workspace(sglang, read_only=True)
    try:
        html = render_report(con)
        steps = con.execute("SELECT count(*) FROM time_partition WHERE step IS NOT NULL").fetchone()[0]
    finally:
        con.close()
    table = html.split('id="partition-table"', 1)[1].split("</table>", 1)[0]
    (inner,) = re.findall(r'<tr data-row="[^"]*">(.*?)</tr>', table)  # one rank
    got = {k: int(v) for k, v in re.findall(r'data-key="(\w+_ns)" data-value="(\d+)"', inner)}
    assert got["copies_ns"] / 1e6 == pytest.approx(timeline["exposed_memcpy_time"], abs=0.0005)
    assert got["copies_total_ns"] / 1e6 == pytest.approx(timeline["total_memcpy_time"], abs=0.0005)
    assert got["memory_kernels_ns"] + got["copies_ns"] == got["memory_ns"]
    assert got["copies_ns"] < 0.001 * got["memory_kernels_ns"]
    r = compare(sglang, sglang, findings=False)
    (p,) = r["partition"]["per_rank"]
    if not steps:  # compare's window is then the whole capture, TraceLens' timeline
        assert p["before"]["copies_ns"] / 1e6 == pytest.approx(timeline["exposed_memcpy_time"], abs=0.0005)
    assert p["before"]["copies_ns"] < 0.001 * p["before"]["memory_kernels_ns"]
    assert all(p["delta"][c] == 0 for c in SPLIT)


VLLM_CAPTURE = TRACES / (
    "kineto/tracelens/inference/vllm_decode_full/capture_traces/"
    "graph_capture_rank_0.1773709742341309550.pt.trace.json.gz"
)
CUPTI_PROFILER = TRACES / "kineto/hta/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz"


@requires_shared
def test_compare_of_traces_without_steady_work_says_why_instead_of_failing(tmp_path):
    """Found comparing every shared trace with itself. vLLM's graph-capture trace: 28.8 µs of
    memory work (19.6 µs of kernels, 9.2 µs of copies: time_partition) in a 57.8 ms
    window, so some trimmed cut of it holds no kernel work (rate 0): the work-rate range divided by
    it (ZeroDivisionError); it is now not comparable, with the reason. HTA's cupti_profiler trace
    has no kernel and no copy (counted below): the HTML diff's kernel waterfall read per-step
    totals that are not there (KeyError); the page now renders without it."""
    import duckdb

    from nsight_analyze.compare import compare
    from nsight_analyze.ingest.run import ingest
    from nsight_analyze.render.compare_html import render

    db = tmp_path / "vllm.duckdb"
    ingest([VLLM_CAPTURE], db)
    r = compare(db, db, findings=False)
    wr = r["work_rate"]
    assert not wr["comparable"] and "work rate is 0" in wr["why"] and r["verdict"]["basis"] == "none"
    con = duckdb.connect(str(db), read_only=True)
    want = con.execute(
        "SELECT memory_ns, memory_kernels_ns, copies_ns FROM time_partition WHERE step IS NULL"
    ).fetchone()
    con.close()
    total = r["partition"]["total"]["before"]
    assert (total["memory_ns"], total["memory_kernels_ns"], total["copies_ns"]) == want
    assert 'id="partition"' in render(r)

    empty = tmp_path / "cupti.duckdb"
    ingest([CUPTI_PROFILER], empty)
    con = duckdb.connect(str(empty), read_only=True)
    assert (
        con.execute("SELECT (SELECT count(*) FROM kernels) + (SELECT count(*) FROM memops)").fetchone()[0]
        == 0
    )
    con.close()
    r = compare(empty, empty, findings=False)
    assert r["partition"]["total"] is None
    page = render(r)
    assert "no time partition" in page and "fig-kernels" not in page
