"""The runs page (`report --runs`, `runs --html`) in a real browser: Debian's chromium, driven by
Playwright, fully offline (issue 55).

Checks what only a browser can: the page's JavaScript runs without errors, every plotly figure
draws its traces, no request leaves file:, a hostile label shows as text and never runs (no
dialog), and the curves the browser holds equal the library's `runs()`. Saves a screenshot as
test-artifacts/runs_page.png. The chromium, its flags and the skip conditions are
test_report_browser's.

Oracles: the efficiency curve, the loss stack, the step time and MFU curves are the library's
`runs.runs()` document of the same workspace (tests/test_runs.py checks that document against
the generator's scaling_truth.json); the labels are written by this test.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_report_browser import ARTIFACTS, CHROMIUM, chromium, load_offline, sync_playwright
from test_runs import cli

from nsight_analyze.render.report.figures import escape
from nsight_analyze.runs import READS, runs
from nsight_analyze.runs.scaling import LOSS_PARTS
from nsight_analyze.store.workspace import open_workspace

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        sync_playwright is None, reason="playwright is not installed (pip install -e '.[dev]')"
    ),
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is missing (run .ci/install-system-deps as root)"),
]

SIZES = "4,8,16"  # three points on the curve, 28 ranks in all
SMALL = ["--steps", "3", "--kernels-per-step", "30"]
EVIL_NAME = "<img src=x onerror=alert(1)>"  # the n8 run's name, from its run.json
EVIL_NOTE = "<script>alert(2)</script>"  # every run's `note`, from `ingest --label`
FLOPS = "2e13"  # model_flops_per_step label: MFU known, so the MFU curve is drawn

# The two ways to write the page: (command, figures it draws).
PAGES = {
    "report --runs": ("report", "--runs"),
    "runs --html": ("runs", "--by", "world_size", "--over", "time"),
}
FIGURES = {
    "report --runs": {"runs-scaling", "runs-sweep", "runs-dims"},
    "runs --html": {"runs-scaling", "runs-sweep", "runs-history", "runs-dims"},
}


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    """A strong-scaling series 4, 8, 16 GPUs (straggler from 16) with hostile labels, ingested;
    each page written: {page: (html file, the library's runs() document of that page)}."""
    root = tmp_path_factory.mktemp("runs-browser")
    code, out = cli("synth", root / "s", "--scaling", SIZES, *SMALL, "--scaling-straggler", "16:+30")
    assert code == 0, out
    labels = root / "s" / "n8" / "run.json"
    labels.write_text(json.dumps(json.loads(labels.read_text()) | {"name": EVIL_NAME}))
    db = root / "s.duckdb"
    code, out = cli(
        "ingest", root / "s", "--db", db, "-q", "--analyze", "comm_groups",
        "--label", f"note={EVIL_NOTE}", "--label", f"model_flops_per_step={FLOPS}",
    )  # fmt: skip
    assert code == 0, out
    html = root / "report_runs.html"
    code, out = cli("report", "--runs", "--db", db, "-o", html)
    assert code == 0, out
    code, out = cli("runs", "--db", db, *PAGES["runs --html"][1:], "--html", root / "runs.html")
    assert code == 0, out
    con = open_workspace(db, read_only=True, must_exist=True, needs=list(READS))
    try:
        return {
            "report --runs": (html, runs(con, scaling="strong")),
            "runs --html": (root / "runs.html", runs(con, by="world_size", scaling="strong", over="time")),
        }
    finally:
        con.close()


@pytest.fixture(scope="module")
def browser(pages):
    """Each page loaded in chromium with every non-file request aborted: {page: (Page, what the
    browser reported while loading it)}."""
    with sync_playwright() as p:
        with chromium(p) as ctx:
            loaded = {name: load_offline(ctx, path) for name, (path, _) in pages.items()}
            ARTIFACTS.mkdir(exist_ok=True)
            loaded["runs --html"][0].screenshot(path=str(ARTIFACTS / "runs_page.png"), full_page=True)
            yield loaded


def _figure(pg, fid: str) -> list[dict]:
    """The traces plotly drew in fig-FID (the data of the live plot, not the page's JSON)."""
    return pg.evaluate(
        f"document.getElementById('fig-{fid}').data"
        ".map(t => ({name: t.name, type: t.type, yaxis: t.yaxis || 'y', x: t.x, y: t.y}))"
    )


def _by_gpus(x: list[str], y: list[float]) -> dict[int, float]:
    """The scaling figure's points keyed by GPU count (its x labels read 'N GPUs · name')."""
    return {int(re.match(r"(\d+) GPUs · ", label).group(1)): v for label, v in zip(x, y)}


@pytest.mark.parametrize("name", list(PAGES))
def test_no_errors_offline_and_every_figure_draws(browser, name):
    pg, seen = browser[name]
    assert seen["errors"] == [] and pg.evaluate("window.__reportErrors") == []
    assert [u for u in seen["requests"] if not u.startswith("file:")] == []
    figs = pg.evaluate(
        """Array.from(document.querySelectorAll('div.figure')).map(d => ({
             id: d.id.slice(4), rendered: d.dataset.rendered, svg: d.querySelectorAll('svg.main-svg').length,
             traces: (d.data || []).map(t => t.y.filter(v => v !== null).length),
             drawn: d.querySelectorAll('g.trace').length, height: d.getBoundingClientRect().height}))"""
    )
    assert {f["id"] for f in figs} == FIGURES[name]
    assert pg.evaluate("document.body.dataset.figuresRendered") == str(len(figs))
    for f in figs:
        assert f["rendered"] == "true" and f["svg"] > 0, f
        assert f["traces"] and all(n > 0 for n in f["traces"]), f  # every trace has points
        assert f["drawn"] >= len(f["traces"]), f  # and an SVG group per trace
        assert f["height"] >= 300, f  # never squeezed into the 200 px box (legend over the ticks)


@pytest.mark.parametrize("name", list(PAGES))
def test_efficiency_curve_and_loss_stack_equal_the_library(browser, pages, name):
    pg, _ = browser[name]
    scaling = pages[name][1].scaling
    assert scaling["mode"] == "strong" and len(scaling["runs"]) == 3
    (curve, *stack) = _figure(pg, "runs-scaling")
    assert curve["type"] == "scatter" and curve["yaxis"] == "y"
    want = {e["gpus"]: 100 * e["efficiency"] for e in scaling["runs"]}
    assert _by_gpus(curve["x"], curve["y"]) == pytest.approx(want, rel=1e-12)
    # under it, stacked on its own axis: one bar trace per loss part, each run's points lost
    assert [t["name"] for t in stack] == [f"lost: {p.replace('_', ' ')}" for p in LOSS_PARTS]
    assert {(t["type"], t["yaxis"]) for t in stack} == {("bar", "y2")}
    assert pg.evaluate("document.getElementById('fig-runs-scaling').layout.barmode") == "relative"
    for part, trace in zip(LOSS_PARTS, stack):
        lost = {e["gpus"]: e["loss"][part]["points"] for e in scaling["runs"]}
        assert _by_gpus(trace["x"], trace["y"]) == pytest.approx(lost, rel=1e-12, abs=1e-12), part
    for gpus, eff in want.items():  # the stack reaches the curve's complement (the parts tile the loss)
        total = sum(_by_gpus(t["x"], t["y"])[gpus] for t in stack)
        assert total == pytest.approx(100 - eff, rel=1e-9, abs=1e-9)
    assert pg.evaluate("document.querySelectorAll('#fig-runs-scaling g.trace.bars').length") == len(
        LOSS_PARTS
    )


@pytest.mark.parametrize("name", list(PAGES))
def test_step_time_and_mfu_against_the_label(browser, pages, name):
    pg, _ = browser[name]
    rows = pages[name][1].rows
    step, mfu, *marked = _figure(pg, "runs-sweep")
    assert (step["name"], step["yaxis"], mfu["name"], mfu["yaxis"]) == (
        "step median (ms)",
        "y",
        "MFU %",
        "y2",
    )
    assert step["y"] == pytest.approx([r["step_median_ns"] / 1e6 for r in rows], rel=1e-12)
    assert all(r["mfu"] is not None for r in rows)  # the label makes every run's MFU known
    assert mfu["y"] == pytest.approx([100 * r["mfu"] for r in rows], rel=1e-12)
    if name == "runs --html":  # --by world_size: the x axis is the label, in its numeric order
        assert step["x"] == [f"world_size={n}" for n in (4, 8, 16)]
    else:
        assert step["x"] == [escape(r["name"]) for r in rows]  # inert for plotly's HTML-like labels
    best = [i for i, r in enumerate(rows) if r.get("best")]  # runs/select.py mark_best, by the page's metric
    if best:  # a sweep's best run is starred where its step median is drawn
        (star,) = marked
        assert star["x"] == [step["x"][i] for i in best]
        assert star["y"] == pytest.approx([step["y"][i] for i in best], rel=1e-12)
    else:
        assert marked == []
    titles = pg.evaluate(
        "Array.from(document.querySelectorAll('#fig-runs-sweep .g-ytitle, #fig-runs-sweep .g-y2title'))"
        ".map(t => t.textContent)"
    )
    assert sorted(titles) == ["MFU %", "step median (ms)"]


def test_history_marks_the_best_run(browser, pages):
    pg, _ = browser["runs --html"]
    rows = pages["runs --html"][1].rows
    line, best = _figure(pg, "runs-history")
    assert line["y"] == pytest.approx([r["step_median_ns"] / 1e6 for r in rows], rel=1e-12)
    (fastest,) = [r for r in rows if r["best"]]
    assert best["y"] == pytest.approx([fastest["step_median_ns"] / 1e6], rel=1e-12)
    assert fastest["step_median_ns"] == min(r["step_median_ns"] for r in rows)


@pytest.mark.parametrize("name", list(PAGES))
def test_hostile_labels_show_as_text_and_never_run(browser, name):
    pg, seen = browser[name]
    text = pg.evaluate("document.body.innerText")
    assert EVIL_NAME in text and EVIL_NOTE in text  # the runs table and the scaling lines
    assert EVIL_NAME in pg.evaluate("document.getElementById('runs-table').innerText")
    assert pg.evaluate("document.querySelectorAll('img').length") == 0
    assert pg.evaluate("document.querySelectorAll('script').length") == 3  # figure JSON, plotly, page
    # plotly writes the run's name on the efficiency curve's axis as literal SVG text
    ticks = pg.evaluate(
        "Array.from(document.querySelectorAll('#fig-runs-scaling .xtick text')).map(t => t.textContent)"
    )
    assert f"8 GPUs · {EVIL_NAME}" in ticks
    # hover the hostile run's point: the hover label is text too
    pg.evaluate(
        """(() => { const d = document.getElementById('fig-runs-scaling');
             const i = d.data[0].x.findIndex(x => x.includes('onerror'));
             Plotly.Fx.hover(d, [{curveNumber: 0, pointNumber: i}]); })()"""
    )
    pg.wait_for_timeout(300)
    assert seen["dialogs"] == []
    assert (ARTIFACTS / "runs_page.png").stat().st_size > 10_000


@pytest.mark.parametrize("name", list(PAGES))
def test_numbers_in_the_runs_table_stay_on_one_line(browser, name):
    """The wide labels column once squeezed the number columns until "54.8 %" broke before its
    "%": every number (and the date) is one line of text."""
    pg, _ = browser[name]
    lines = pg.evaluate(
        """Array.from(document.querySelectorAll('#runs-table td')).filter(td => td.style.whiteSpace)
             .map(td => { const r = document.createRange(); r.selectNodeContents(td);
                          const tops = Array.from(r.getClientRects()).map(q => q.top);
                          return [td.textContent, new Set(tops).size]; })"""
    )
    assert len(lines) >= 5 * 3  # run, step median, steps/s, samples/s, MFU of each of the 3 runs
    assert [t for t, n in lines if n != 1] == []
