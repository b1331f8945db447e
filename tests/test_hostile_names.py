"""Hostile trace text through every output (issue 18): kernel and NVTX names are the traced
program's, so they may hold `|`, `<script>`, backticks, newlines, terminal escape sequences, `]]>`
and Markdown link syntax. Every printing command, in every format it gives, and both HTML pages
must show such a name literally and stay well-formed:

- table (terminal): no control character reaches the terminal (`render.escape.clean`);
- markdown: no raw HTML, no link, no code span from the name, every table row keeps its header's
  column count (`render.escape.markdown`);
- json: the exact name round-trips; csv: a rectangular table whose cell is the exact name
  (both are data: their own quoting makes the text safe);
- HTML report and compare page: no `<script>` but ours, no control character, no `]]>`
  (`render.escape.html`, `render.escape.script_json`).

The workspace is the bundled sample job (sample_traces/) with its longest compute kernel and its
data-loader NVTX ranges renamed after ingest, then re-analysed (`analysis.refresh(force=True)`).
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil

import pytest
from click.testing import CliRunner
from conftest import copy_workspace

from nsight_analyze.cli import main
from nsight_analyze.render.escape import code_block, markdown

KERNEL = "gemm|x `tick` <script>alert(1)</script> ]]> [click](http://e.invalid) \x1b[31mred\x1b[0m\nnext|line"
NVTX = "dataloader|y `t` <script>alert(2)</script> ]]> [l](http://e.invalid) \x1b[2J\nz"
# What a reader must see of each name: its start, as the terminal shows it and as Markdown writes it.
KERNEL_SHOWN = "gemm|x `tick` <script>"
NVTX_SHOWN = "dataloader|y `t` <script>"
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # all but tab and newline
PIPE = re.compile(r"(?<!\\)(?:\\\\)*\|")  # a `|` that is not backslash-escaped
SQL = "SELECT name, count(*) AS n FROM kernels GROUP BY name ORDER BY n DESC"

# Per printing command: its invocations, and the planted names its output reports (why: summary
# lists the top kernels, sql selects kernel names, compare diffs kernels by name and the AFTER run
# has the planted kernel shortened, diagnose's input-stall evidence names the data-loader NVTX
# ranges around each stall; the others report no kernel or NVTX name, and are checked for
# well-formed output all the same).
CASES = {
    "summary": ([["summary", "--db", "{db}"], ["summary", "--db", "{db}", "--by", "step"]], {KERNEL}),
    "sql": ([["sql", "--db", "{db}", SQL]], {KERNEL}),
    "compare": ([["compare", "{db}", "{after}"]], {KERNEL}),
    "diagnose": ([["diagnose", "--db", "{db}"]], {NVTX}),
    "ranks": ([["ranks", "--db", "{db}"]], set()),
    "mfu": ([["mfu", "--db", "{db}", "--model-flops-per-step", "4e14"]], set()),
    "classify": ([["classify", "--db", "{copy}"]], set()),  # re-classifies: writes, so on a copy
    "gpus": ([["gpus", "--db", "{db}"]], set()),
    "info": ([["info", "--db", "{db}"]], set()),
    "whatif": ([["whatif", "--db", "{db}"]], set()),
    "comms": ([["comms", "--db", "{db}"]], set()),
    "runs": ([["runs", "--db", "{db}"]], set()),
}
FORMATS = ("table", "json", "csv", "markdown")


@pytest.fixture(scope="module")
def dbs(tmp_path_factory, sample_workspace):
    """The sample job with hostile names ({db}), a copy ({copy}), and an AFTER run ({after}) whose
    hostile kernel is 20% shorter (so compare lists it among the changes)."""
    from nsight_analyze import analysis
    from nsight_analyze.store.workspace import open_workspace

    tmp = tmp_path_factory.mktemp("hostile")
    db, after = copy_workspace(sample_workspace, tmp / "hostile.duckdb"), tmp / "after.duckdb"
    con = open_workspace(db)
    top = con.execute(
        "SELECT name FROM kernels WHERE category = 'compute' "
        "GROUP BY name ORDER BY sum(end_ns - start_ns) DESC LIMIT 1"
    ).fetchone()[0]
    con.execute("UPDATE kernels SET name = ? WHERE name = ?", [KERNEL, top])
    con.execute("UPDATE nvtx SET text = ? WHERE text ILIKE '%dataloader%'", [NVTX])
    analysis.refresh(con, force=True)
    con.close()
    shutil.copy(db, tmp / "copy.duckdb")
    shutil.copy(db, after)
    con = open_workspace(after)
    con.execute(
        "UPDATE kernels SET end_ns = start_ns + (end_ns - start_ns) * 4 // 5 WHERE name = ?", [KERNEL]
    )
    analysis.refresh(con, force=True)
    con.close()
    return {"db": str(db), "copy": str(tmp / "copy.duckdb"), "after": str(after)}


def run(args: list[str], dbs: dict, *extra: str):
    args = [a.format(**dbs) for a in args] + list(extra)
    return CliRunner().invoke(main, args, env={"COLUMNS": "100"}, catch_exceptions=False)


def strings(obj) -> list[str]:
    """Every string in a JSON document (keys and values)."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in [k, *strings(v)]]
    if isinstance(obj, list):
        return [s for v in obj for s in strings(v)]
    return []


def check_markdown(out: str) -> None:
    """No raw HTML, link or code span from a planted name; every table row as wide as its header."""
    assert not CONTROL.search(out), repr(CONTROL.search(out))
    assert "<script" not in out and "]]>" not in out
    assert "[click](" not in out and "[l](" not in out
    assert not re.search(r"(?<!\\)`tick", out) and not re.search(r"(?<!\\)`t` ", out)
    lines = out.splitlines()
    tables = 0
    for i, line in enumerate(lines[:-1]):
        if line.startswith("| ") and re.fullmatch(r"\|(---\|)+", lines[i + 1]):
            tables += 1
            width = len(PIPE.findall(line))
            assert width == lines[i + 1].count("|"), line
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                assert len(PIPE.findall(row)) == width, row
    assert tables, out[:400]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_format_shows_hostile_names_literally(dbs, name, fmt):
    from nsight_analyze.cli import main as group

    cmd = group.get_command(group.make_context("nsight-analyze", ["--help"], resilient_parsing=True), name)
    if fmt not in cmd.callback.output_formats:
        pytest.skip(f"`{name}` gives no --format {fmt} (tests/test_cli_convention.py checks the refusal)")
    invocations, planted = CASES[name]
    for args in invocations:
        res = run(args, dbs, "--format", fmt)
        assert res.exit_code == 0, (args, res.output)
        out = res.stdout
        if fmt == "table":
            assert not CONTROL.search(res.output), repr(CONTROL.search(res.output))
            for text, shown in ((KERNEL, KERNEL_SHOWN), (NVTX, NVTX_SHOWN)):
                assert (shown in out) == (text in planted), (args, shown)
        elif fmt == "markdown":
            check_markdown(out)
            for text, shown in ((KERNEL, KERNEL_SHOWN), (NVTX, NVTX_SHOWN)):
                assert (markdown(shown) in out) == (text in planted), (args, markdown(shown))
        elif fmt == "json":
            found = set(strings(json.loads(out)))
            for text in (KERNEL, NVTX):
                assert (text in found) == (text in planted), (args, text)
            # the document itself is printable: json.dumps escapes every control character
            assert not CONTROL.search(out)
        else:
            rows = list(csv.reader(io.StringIO(out)))
            assert len(rows) >= 2 and all(len(r) == len(rows[0]) for r in rows), rows[:3]
            if name == "sql":  # the selected names, cell for cell
                assert KERNEL in [r[0] for r in rows]


def check_page(page: str, scripts: int) -> str:
    """Our markup (the page without the inlined plotly.js bundle) holds exactly `scripts` script
    tags, no control character, no `]]>`, and no planted markup; returns it."""
    from plotly.offline import get_plotlyjs

    assert page.count(get_plotlyjs()) == 1
    ours = page.replace(get_plotlyjs(), "")
    assert ours.count("<script") == scripts, ours.count("<script")
    assert "<script>alert" not in ours and "]]>" not in ours
    assert not CONTROL.search(ours), repr(CONTROL.search(ours))
    return ours


def test_report_html_escapes_hostile_names(dbs, tmp_path):
    """Scripts: the figure JSON block, plotly.js, the page's renderer (html.page)."""
    from nsight_analyze.api.outputs import write_report
    from nsight_analyze.store.workspace import open_workspace

    con = open_workspace(dbs["db"], read_only=True)
    try:
        path = write_report(con, tmp_path / "report.html")
    finally:
        con.close()
    ours = check_page(path.read_text(encoding="utf-8"), scripts=3)
    assert "gemm|x `tick` &lt;script&gt;alert(1)&lt;/script&gt; ]]&gt;" in ours  # the kernel table


def test_compare_html_escapes_hostile_names(dbs, tmp_path):
    """Scripts: one JSON block per figure (4), plotly.js, the drawing script."""
    page = tmp_path / "diff.html"
    res = run(["compare", "{db}", "{after}", "--format", "json", "--html", str(page)], dbs)
    assert res.exit_code == 0, res.output
    assert KERNEL in set(strings(json.loads(res.stdout)))
    ours = check_page(page.read_text(encoding="utf-8"), scripts=6)
    assert "gemm|x `tick` &lt;script&gt;alert(1)&lt;/script&gt; ]]&gt;" in ours  # the kernels table


def test_escape_functions():
    """The escapes themselves, on each hostile piece (expected values written out by hand)."""
    assert markdown("a|b") == "a\\|b"
    assert markdown("<script>") == "&lt;script&gt;"
    assert markdown("`x`") == "\\`x\\`"
    assert markdown("[l](u)") == "\\[l\\](u)"
    assert markdown("a\nb") == "a b"
    assert markdown("\x1b[2J") == "\\\\x1b\\[2J"  # shown as the terminal shows it: \x1b[2J
    assert markdown("]]>") == "\\]\\]&gt;"
    assert code_block("SELECT 1", "sql") == "```sql\nSELECT 1\n```"
    assert code_block("a ```` b") == "`````\na ```` b\n`````"  # a fence the text cannot close


def test_ingest_lines_escape_hostile_file_names(tmp_path):
    """A file name is the filesystem's, not ours: one holding a terminal escape and a newline was
    printed raw by ingest's per-file line (`ok: a<newline>b<ESC>[31m...`), so it could recolour or
    clear the terminal and split the line. Every ingest line now shows it escaped, on one line."""
    from conftest import ROOT

    folder = tmp_path / "traces"
    folder.mkdir()
    hostile = "a\nb\x1b[31mred.sqlite"
    shutil.copy(ROOT / "sample_traces" / "report_rank0.sqlite", folder / hostile)
    (folder / "c\x1b[2Jd.txt").write_text("not a trace")
    res = CliRunner().invoke(main, ["ingest", str(folder), "--db", str(tmp_path / "ws.duckdb")])
    assert res.exit_code == 0, res.output
    assert not CONTROL.search(res.output), repr(res.output)
    lines = res.output.splitlines()
    assert f"ok: {folder}/a b\\x1b[31mred.sqlite (3,167 rows" in "\n".join(lines), lines
    assert f"ignored: {folder}/c\\x1b[2Jd.txt: not a recognised trace format" in lines, lines
    # info's not-loaded lines (the sample's NVTX naming rows) printed the newline raw too
    res = CliRunner().invoke(main, ["info", "--db", str(tmp_path / "ws.duckdb")], env={"COLUMNS": "400"})
    assert res.exit_code == 0 and not CONTROL.search(res.output), repr(res.output)
    assert f"not loaded: {folder}/a b\\x1b[31mred.sqlite: NVTX_EVENTS" in res.output, res.output


def test_error_lines_escape_control_characters(tmp_path):
    """An error line quotes paths and file content (a Prometheus line, a JSON key): one holding a
    terminal escape reached the terminal raw through `error: ...`."""
    db = tmp_path / "x\x1b[31m" / "ws.duckdb"
    res = CliRunner().invoke(main, ["summary", "--db", str(db)])
    assert res.exit_code != 0 and not CONTROL.search(res.output), repr(res.output)
    assert "x\\x1b[31m" in res.output, res.output
