"""The report in a real browser: Debian's chromium, driven by Playwright, fully offline.

Checks what only a browser can: the JavaScript runs without errors, every figure draws, the
timeline has traces, hostile trace text shows as text and never runs (no dialog), and the
numbers in the DOM equal the library's. Saves a screenshot under test-artifacts/.
"""

from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_report import IMG, SCRIPT, SECRET, library_partition, make_workspace

from nsight_analyze.api.outputs import write_report
from nsight_analyze.render.report.sections import SECTIONS
from nsight_analyze.report_doc import PARTITION_COLUMNS

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - depends on the environment
    sync_playwright = None

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        sync_playwright is None, reason="playwright is not installed (pip install -e '.[dev]')"
    ),
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is missing (run .ci/install-system-deps as root)"),
]


@contextmanager
def chromium(p):
    """Debian's chromium, headless, in a fresh profile that is removed with it (p: a started
    sync_playwright)."""
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        ctx = p.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            headless=True,
            args=ARGS,
            viewport={"width": 1400, "height": 1000},
        )
        try:
            yield ctx
        finally:
            ctx.close()


def load_offline(ctx, path: Path) -> tuple:
    """Open path in a new page of ctx, every non-file request aborted (and recorded), until every
    figure has drawn (a page that never finishes drawing fails here, at 120 s): (Page, what the
    browser reported while loading it: errors, dialogs, requests)."""
    pg = ctx.new_page()
    seen: dict[str, list] = {"errors": [], "dialogs": [], "requests": []}
    pg.on("pageerror", lambda e: seen["errors"].append(f"pageerror: {e}"))
    pg.on("console", lambda m: seen["errors"].append(f"console: {m.text}") if m.type == "error" else None)
    pg.on("dialog", lambda d: (seen["dialogs"].append(d.message), d.dismiss()))

    def offline(route):
        seen["requests"].append(route.request.url)
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            route.abort()

    pg.route("**/*", offline)
    pg.goto(path.as_uri())
    pg.wait_for_function("document.body.dataset.figuresRendered", timeout=120_000)
    return pg, seen


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    con = make_workspace(tmp)
    path = write_report(con, tmp / "report.html")
    yield con, path
    con.close()


@pytest.fixture(scope="module")
def page(report):
    """The loaded report page plus what the browser reported while loading it."""
    _, path = report
    with sync_playwright() as p:
        with chromium(p) as ctx:
            pg, seen = load_offline(ctx, path)
            ARTIFACTS.mkdir(exist_ok=True)
            pg.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
            yield pg, seen


def test_no_javascript_errors_and_all_figures_render(page):
    pg, seen = page
    assert seen["errors"] == []
    assert pg.evaluate("window.__reportErrors") == []
    figs = pg.evaluate(
        "Array.from(document.querySelectorAll('[data-figure]'))"
        ".map(d => [d.dataset.figure, d.dataset.rendered])"
    )
    assert figs and all(r == "true" for _, r in figs), figs
    assert pg.evaluate("document.body.dataset.figuresRendered") == str(len(figs))
    assert (ARTIFACTS / "report.png").stat().st_size > 10_000


def test_works_offline(page):
    _, seen = page
    assert [u for u in seen["requests"] if not u.startswith("file:")] == []


def test_every_section_present(page):
    pg, _ = page
    present = pg.evaluate("Array.from(document.querySelectorAll('section[data-section]')).map(s => s.id)")
    assert present == [sid for sid, _ in SECTIONS]


def test_timeline_has_traces_for_every_rank(page, report):
    pg, _ = page
    con, _ = report
    traces = pg.evaluate(
        "document.getElementById('fig-timeline').data.map(t => [t.name, t.x.length, new Set(t.y).size])"
    )
    names = {t[0] for t in traces}
    assert {"compute", "memory", "comms"} <= names
    assert all(n > 0 for _, n, _ in traces)
    lanes = pg.evaluate(
        "new Set([].concat(...document.getElementById('fig-timeline').data"
        ".map(t => t.y.filter(v => v !== null)))).size"
    )
    n_ranks = con.execute("SELECT count(*) FROM ranks").fetchone()[0]
    assert lanes >= 3 * n_ranks  # compute, memory, comms rows of every rank (idle where there is idle)


def test_dom_numbers_equal_summary(page, report):
    pg, _ = page
    con, _ = report
    dom = pg.evaluate(
        """Array.from(document.querySelectorAll('#partition-table tbody tr')).map(tr => {
             const o = {rank: tr.dataset.row};
             tr.querySelectorAll('td[data-key]').forEach(td => { o[td.dataset.key] = td.dataset.value; });
             return o; })"""
    )
    rows = {str(r["rank"]): r for r in library_partition(con)}
    assert {d["rank"] for d in dom} == set(rows)
    for d in dom:
        want = rows[d["rank"]]
        for col in PARTITION_COLUMNS:
            if want[col] is None:
                assert d[col] == ""
            elif isinstance(want[col], float):
                assert float(d[col]) == pytest.approx(want[col], rel=1e-12)
            else:
                assert int(d[col]) == want[col], (d["rank"], col)


def test_hostile_text_is_shown_as_text_and_never_runs(page):
    pg, seen = page
    text = pg.evaluate("document.body.innerText")
    assert SCRIPT in text and IMG in text  # kernel name (top kernels) and NVTX text (longest idle pieces)
    longest = pg.evaluate("document.getElementById('longest-gaps-table').innerText")
    assert SCRIPT in longest
    assert pg.evaluate("document.querySelectorAll('img').length") == 0
    assert pg.evaluate("document.querySelectorAll('script').length") == 3
    # hover the injected kernel in the top-kernels chart: plotly shows it as literal text
    label = pg.evaluate(
        """(() => { const d = document.getElementById('fig-kernels');
             const i = d.data[0].y.findIndex(y => y.includes('&lt;script&gt;'));
             Plotly.Fx.hover(d, [{curveNumber: 0, pointNumber: i}]);
             const h = d.querySelector('.hovertext'); return h ? h.textContent : ''; })()"""
    )
    assert "<script>alert(1)</script>" in label
    pg.wait_for_timeout(300)
    assert seen["dialogs"] == []
    assert SECRET not in pg.content()
