"""The HTML report: sections, numbers equal to the library's, escaping, secrets, size budget.

The browser half (JavaScript runs, figures draw, no dialog fires) is tests/test_report_browser.py;
these tests read the file as text and need no browser.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from nsight_analyze.api.outputs import render_report, write_report
from nsight_analyze.errors import UserError
from nsight_analyze.render.report.sections import SECTIONS
from nsight_analyze.report_doc import PARTITION_COLUMNS, StepRange, parse_steps
from nsight_analyze.report_doc.timeline import build as build_timeline

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
SECRET = "sk-live-0123456789abcdefghijklmnopqrstuv"


def make_workspace(tmp: Path, ranks: int = 4, steps: int = 6, hostile: bool = True):
    """A synthetic job (rank 2 straggles, input stalls), ingested; optionally with hostile text.

    Returns an open read-write connection. The kernel taking the most time and the input-pipeline
    NVTX ranges get script/markup payloads; env gets a secret-looking value that the report must
    never show.
    """
    from nsight_analyze.analysis import refresh
    from nsight_analyze.ingest.run import ingest
    from nsight_analyze.store.workspace import open_workspace
    from nsight_analyze.synth import generate

    generate(
        tmp / "traces",
        ranks=ranks,
        gpus_per_node=2,
        steps=steps,
        kernels_per_step=120,
        injections=["straggler=2:+25", "input-stall=2:3"],
        truth=False,
    )
    db = tmp / "ws.duckdb"
    ingest([tmp / "traces"], db)
    con = open_workspace(db)
    if hostile:
        top = con.execute(
            "SELECT name FROM kernels WHERE category = 'compute' "
            "GROUP BY name ORDER BY sum(end_ns - start_ns) DESC LIMIT 1"
        ).fetchone()[0]
        con.execute("UPDATE kernels SET name = ? WHERE name = ?", [f"gemm {SCRIPT} {IMG}", top])
        con.execute("UPDATE nvtx SET text = text || ? WHERE text ILIKE '%dataloader%'", [f" {SCRIPT} {IMG}"])
        con.execute(
            "INSERT INTO env VALUES (0, 'MY_API_KEY', ?), (0, 'NCCL_FAKE_SETTING', ?)", [SECRET, SECRET]
        )
        refresh(con, force=True)  # the stored results then carry the planted names
    con.execute("SET enable_progress_bar = false")
    return con


def library_partition(con) -> list[dict]:
    """What `summary --format json` prints per rank (summary(con, by='rank')), else the view it reads."""
    try:
        from nsight_analyze.summary import summary
    except ImportError:
        summary = None
    if summary is not None:
        from nsight_analyze.report_doc import rows_of as _rows_of

        rows = _rows_of(summary(con, by="rank"))
        if rows:
            return [r for r in rows if r.get("step") is None]
    df = con.execute("SELECT * FROM time_partition WHERE step IS NULL ORDER BY rank").df()
    return df.astype(object).where(df.notna(), None).to_dict("records")


def cells(html: str, table_id: str) -> dict[tuple[str, str], str]:
    """{(row key, column): data-value} of a report table."""
    body = html.split(f'id="{table_id}"', 1)[1].split("</table>", 1)[0]
    out = {}
    for row, inner in re.findall(r'<tr data-row="([^"]*)">(.*?)</tr>', body):
        for key, value in re.findall(r'data-key="([^"]*)" data-value="([^"]*)"', inner):
            out[(row, key)] = value
    return out


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    con = make_workspace(tmp)
    path = write_report(con, tmp / "report.html")
    yield con, path, path.read_text(encoding="utf-8")
    con.close()


def test_every_section_is_present(hostile):
    _, _, html = hostile
    for sid, _ in SECTIONS:
        assert f'data-section="{sid}"' in html, sid
    for fig in ("partition", "timeline", "heatmap", "overlap", "skew", "waits", "kernels", "gaps"):
        assert f'data-figure="{fig}"' in html, fig
    for tid in (
        "partition-table",
        "comm-overlap-table",
        "collectives-table",
        "rank-rollup-table",
        "kernels-table",
        "longest-gaps-table",
        "files-table",
        "ranks-table",
        "alignment-table",
        "env-table",
    ):
        assert f'id="{tid}"' in html, tid


def test_self_contained_and_offline(hostile):
    _, path, html = hostile
    assert not re.search(r"<script[^>]+src=", html), "no external scripts"
    assert not re.search(r"<link[^>]+href=\"?https?:", html), "no external stylesheets"
    from plotly.offline import get_plotlyjs

    ours = html.replace(get_plotlyjs(), "")  # plotly.js itself names URLs it never fetches here
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", ours), "no remote resources"
    # plotly.js is inlined exactly once, not per figure
    assert html.count("Plotly.newPlot") == 1
    assert len(re.findall(r"plotly\.js v\d", html)) == 1
    assert path.stat().st_size < 15e6


def figure_data(html: str) -> dict:
    """The page's figures: the JSON block plotly.js draws from."""
    block = re.search(r'<script type="application/json" id="figure-data">(.*?)</script>', html, re.S)
    return json.loads(block[1])


def test_figures_are_valid_plotly(hostile):
    """The figures are written as plain JSON (figures.py does not use plotly's classes): plotly's
    own validator accepts every figure and the timeline's layout, property by property."""
    import plotly.graph_objects as go

    _, _, html = hostile
    figs = figure_data(html)
    # the eight figures test_every_section_is_present requires of this workspace
    assert set(figs) == {"partition", "timeline", "heatmap", "overlap", "skew", "waits", "kernels", "gaps"}
    for name, fig in figs.items():
        if "timeline" in fig:  # its traces are built in the page from the payload
            go.Layout(fig["layout"])
        else:
            assert go.Figure(fig).data, name  # raises ValueError on any unknown property or bad value
        assert fig["layout"]["template"]["layout"]["plot_bgcolor"] == "white", name  # plotly_white


def test_report_does_not_import_plotly_in_python(hostile, tmp_path):
    """The page inlines plotly.js, read from plotly's package data; no plotly module is imported
    (writing a report of this workspace, every figure drawn)."""
    import subprocess
    import sys

    con, _, _ = hostile
    db = con.execute(
        "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
    ).fetchone()[0]
    con.execute("CHECKPOINT")
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(Path(db).read_bytes())
    code = (
        "import sys; from nsight_analyze.store.workspace import open_workspace; "
        "from nsight_analyze.api.outputs import render_report; "
        f"con = open_workspace({str(copy)!r}, read_only=True); html = render_report(con); "
        "assert 'Plotly.newPlot' in html and 'plotly.js v' in html; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'plotly'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_partition_numbers_equal_the_library(hostile):
    con, _, html = hostile
    got = cells(html, "partition-table")
    rows = library_partition(con)
    assert rows
    for r in rows:
        for col in PARTITION_COLUMNS:
            want = r.get(col)
            value = got[(str(r["rank"]), col)]
            if want is None:
                assert value == ""
            elif isinstance(want, float):
                assert float(value) == pytest.approx(want, rel=1e-12)
            else:
                assert int(value) == want, (r["rank"], col)


def test_diagnose_runs_beside_the_reads_with_the_stated_gpu(hostile, monkeypatch):
    """collect() runs diagnose on a cursor of its own, in a thread: --gpu (a context variable)
    reaches it there as it reaches `diagnose --gpu`, and the findings are diagnose's own."""
    import nsight_analyze.diagnose as diagnose_module
    from nsight_analyze import gpus
    from nsight_analyze.report_doc import report_document as collect

    con = hostile[0]
    real, seen = diagnose_module.diagnose, []

    def spy(c, *args, **kwargs):
        seen.append((gpus._STATED_GPU.get(), c is con))
        return real(c, *args, **kwargs)

    monkeypatch.setattr(diagnose_module, "diagnose", spy)
    inp = collect(con, mfu_options={"gpu": "H100 SXM"})
    assert seen == [("H100 SXM", False)]
    assert [f.id for f in inp.findings.value] == [f.id for f in real(con)]


def test_headline_ratios_follow_from_the_partition(hostile):
    con, _, html = hostile
    rows = library_partition(con)
    win = sum(r["window_ns"] for r in rows)
    busy = 100.0 * (win - sum(r["idle_ns"] for r in rows)) / win
    m = re.search(r'data-metric="gpu_busy_pct" data-value="([^"]+)"', html)
    assert m and float(m.group(1)) == pytest.approx(busy, rel=1e-12)
    verdict = con.execute("SELECT verdict FROM merge_straggler_verdict").fetchone()[0]
    assert f'data-metric="imbalance_verdict" data-value="{verdict}"' in html


def test_trace_text_is_escaped(hostile):
    _, _, html = hostile
    # no raw payload anywhere (HTML or embedded JSON), but the escaped text is shown
    assert SCRIPT not in html
    assert "<img src=x" not in html
    assert "gemm &lt;script&gt;alert(1)&lt;/script&gt; &quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in html
    assert "DataLoader" in html and "&lt;script&gt;alert(1)" in html.split('id="longest-gaps-table"')[1]
    # the only script elements are the page's own three
    assert html.count("<script") == 3


def test_secrets_never_appear(hostile):
    _, _, html = hostile
    assert SECRET not in html
    assert "MY_API_KEY" not in html


def test_steps_option_limits_heatmap_and_timeline(hostile):
    con, _, _ = hostile
    html = render_report(con, steps="2:3")
    # steps 2 and 3 of make_workspace's job hold about 1,000 operations (4 ranks x 120 kernels per
    # step and their copies), under timeline.MAX_TIMELINE_OPS (20,000): both are shown, exactly
    assert re.search(r'id="timeline-info"[^>]*data-steps="2,3"', html)
    figs = figure_data(html)
    assert [trace["x"] for trace in figs["heatmap"]["data"]] == [["2", "3"], ["2", "3"]]  # step, compute time
    assert "steps 2:3 only" in html and "steps 2:3 summed per rank" in html
    got = cells(html, "partition-table")
    want = con.execute(
        "SELECT rank, sum(compute_ns) FROM time_partition WHERE step BETWEEN 2 AND 3 GROUP BY rank"
    ).fetchall()
    assert {(str(r), "compute_ns"): str(v) for r, v in want}.items() <= got.items()


def test_timeline_over_budget_is_windowed_then_aggregated(hostile):
    con, _, _ = hostile
    full = build_timeline(con)
    assert full.mode == "exact" and len(full.steps_shown) == 3
    small = build_timeline(con, budget=full.ops_in_window // 2)
    assert len(small.steps_shown) < 3
    tiny = build_timeline(con, budget=50)
    assert tiny.mode == "aggregated" and len(tiny.steps_shown) == 1
    assert any("aggregated" in n for n in tiny.notes) and any("windowed" in n for n in tiny.notes)
    merged = sum(sum(s["n"]) for s in tiny.payload["series"].values())
    assert merged == tiny.ops_in_window
    bars = sum(len(s["n"]) for s in tiny.payload["series"].values())
    series = len({(cat, r) for cat, s in tiny.payload["series"].items() for r in s["rank"]})
    assert bars < tiny.ops_in_window
    assert bars <= 27 * series  # MIN_BUCKETS per series (+ ops that began before the window)


def test_timeline_uses_aligned_times(hostile):
    con, _, _ = hostile
    tl = build_timeline(con)
    kern = con.execute(
        "SELECT min(aligned_start_ns) FROM aligned_kernels WHERE aligned_end_ns > ?", [tl.window[0]]
    ).fetchone()[0]
    starts = [tl.payload["t0"] + s for series in tl.payload["series"].values() for s in series["s"]]
    assert min(starts) <= kern


@pytest.mark.parametrize(
    "text,expected",
    [
        ("3:5", StepRange(3, 5)),
        ("5:", StepRange(5, None)),
        (":4", StepRange(None, 4)),
        ("7", StepRange(7, 7)),
        (None, None),
        ("", None),
    ],
)
def test_parse_steps(text, expected):
    assert parse_steps(text) == expected


@pytest.mark.parametrize("text", ["x", "5:3", "1:2:3", ":"])
def test_parse_steps_rejects(text):
    with pytest.raises(UserError):
        parse_steps(text)


def test_command_writes_report_and_rejects_bad_steps(hostile, tmp_path):
    from nsight_analyze.cli import main

    con, _, _ = hostile
    db = con.execute(
        "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
    ).fetchone()[0]
    con.execute("CHECKPOINT")
    runner = CliRunner()
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(Path(db).read_bytes())
    out = tmp_path / "r.html"
    res = runner.invoke(main, ["report", "--db", str(copy), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert out.stat().st_size > 1e6 and "report:" in res.output
    res = runner.invoke(main, ["report", "--db", str(copy), "-o", str(out), "--steps", "9:1"])
    assert res.exit_code == 2 and "bad --steps" in res.output
    # a range past the last step is refused as export refuses it (it gave a page of empty sections)
    last = con.execute("SELECT max(step) FROM steps").fetchone()[0]
    out.unlink()
    res = runner.invoke(main, ["report", "--db", str(copy), "-o", str(out), "--steps", f"{last + 1}:"])
    assert res.exit_code == 2, res.output
    assert f"--steps '{last + 1}:': no such step in the workspace (its steps: 1-{last})" in res.output
    assert not out.exists()
    res = runner.invoke(main, ["report", "--db", str(tmp_path / "none.duckdb")])
    assert res.exit_code == 2 and "no workspace" in res.output


def test_missing_views_become_notes_not_crashes(tmp_path):
    """A fresh workspace without any trace still yields a page that says what is missing."""
    from nsight_analyze.store.workspace import open_workspace

    con = open_workspace(tmp_path / "empty.duckdb")
    html = render_report(con)
    con.close()
    for sid, _ in SECTIONS:
        assert f'data-section="{sid}"' in html
    # the workspace holds no rows at all, so each of these is missing, and the page says why
    for reason in (
        "no GPU operations in the workspace",
        "no step windows (no NVTX steps, none detected)",
        "no NCCL collectives in the capture",
        "no kernels",
        "no idle gaps",
        # diagnose of nothing is not a healthy job: never "No findings: nothing crossed a threshold"
        "no findings can be made: the workspace has no GPU operations (nothing was ingested, or no "
        "file had any)",
    ):
        assert f'<p class="missing">Not available: {reason}</p>' in html, reason
    assert "nothing crossed a threshold" not in html
    assert "<p>None.</p>" in html  # the empty tables (memory operations, sync calls) say so
