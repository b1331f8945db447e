"""compare: deltas equal nsys's own numbers, verdicts match injected ground truth, the gate's exit codes.

Kept small (4 ranks x 12 steps; two ingests shared by the module) because the machine is shared.
The 20-seed false-alarm check feeds the generator's ground-truth step windows straight into the
same statistics compare() uses, so it needs no ingest.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import ORACLES, TRACES, requires_shared

from nsight_analyze.compare import (
    compare,
    compare_samples,
    mann_whitney_p,
    resolve_settings,
    step_time_comparison,
)
from nsight_analyze.compare_html import render
from nsight_analyze.errors import UserError

RANKS, STEPS = 4, 12


def truth_windows(truth: dict) -> pd.DataFrame:
    df = pd.DataFrame(truth["partition"])
    return df[df["step"].notna()][["rank", "step", "window_ns"]]


def slowest_median(truth: dict) -> float:
    return float(truth_windows(truth).groupby("step")["window_ns"].max().median())


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """before: healthy job (seed 1); after: another seed with rank 3 20% slower. Both ingested."""
    from nsight_analyze.ingest import ingest
    from nsight_analyze.synth import generate

    tmp = tmp_path_factory.mktemp("compare")
    out = {"tmp": tmp}
    for name, seed, inj in (("before", 1, ()), ("after", 2, ("straggler=3:+20",))):
        out[f"{name}_truth"] = generate(tmp / name, ranks=RANKS, gpus_per_node=4, steps=STEPS, seed=seed,
                                        injections=inj)
        ingest([tmp / name], tmp / f"{name}.duckdb")
        out[name] = tmp / f"{name}.duckdb"
    return out


@pytest.fixture(scope="module")
def regression(pair):
    return compare(pair["before"], pair["after"], fail_on_regression_pct=5)


# ---------------------------------------------------------------------------------------------
# Statistics


def test_mann_whitney_matches_the_textbook_value():
    # scipy.stats.mannwhitneyu(x, y, method="asymptotic", use_continuity=True).pvalue = 0.012185
    x, y = np.arange(1, 6), np.arange(6, 11)
    assert mann_whitney_p(x, y) == pytest.approx(0.012185, abs=1e-5)
    assert mann_whitney_p(y, x) == pytest.approx(0.012185, abs=1e-5)
    assert mann_whitney_p(np.ones(5), np.ones(5)) == 1.0


def test_bootstrap_is_seeded_and_brackets_the_shift():
    rng = np.random.default_rng(7)
    x = 100 + rng.normal(0, 1, 30)
    y = 110 + rng.normal(0, 1, 30)
    cfg = resolve_settings(None)
    a, b = compare_samples(x, y, cfg), compare_samples(x, y, cfg)
    assert a == b  # deterministic
    lo, hi = a["ci_pct"]
    assert lo < a["delta_pct"] < hi and lo > 5
    other = compare_samples(x, y, resolve_settings({"seed": 3}))
    assert other["ci_pct"] != a["ci_pct"]


def test_too_few_steps_is_neutral_without_interval():
    r = step_time_comparison(
        pd.DataFrame({"rank": [0], "step": [None], "window_ns": [100]}),
        pd.DataFrame({"rank": [0], "step": [None], "window_ns": [200]}),
        resolve_settings(None),
    )
    assert r["verdict"]["verdict"] == "neutral" and r["verdict"]["confidence"] is None
    assert r["slowest"]["ci_pct"] is None and r["slowest"]["delta_pct"] == pytest.approx(100.0)


def test_false_alarm_rate_over_20_seeds(tmp_path):
    """Healthy jobs that differ only in their seed: at most 1 of 20 comparisons may not be neutral."""
    from nsight_analyze.synth import generate

    cfg = resolve_settings(None)
    windows = [
        truth_windows(generate(tmp_path / f"s{s}", ranks=RANKS, gpus_per_node=4, steps=STEPS, seed=s,
                               vacuum=False))
        for s in range(100, 121)
    ]
    pairs = zip(windows, windows[1:])
    verdicts = [step_time_comparison(w0, w1, cfg)["verdict"]["verdict"] for w0, w1 in pairs]
    assert sum(v != "neutral" for v in verdicts) <= 1, verdicts


# ---------------------------------------------------------------------------------------------
# Synthetic runs through the whole pipeline


def test_straggler_in_after_only_is_a_regression_naming_the_rank(pair, regression):
    v = regression["verdict"]
    assert v["verdict"] == "regression" and v["confidence"] > 0.95
    assert v["ranks"] == [3] and "rank 3" in v["reason"]
    assert regression["imbalance"]["after"]["straggler_ranks"] == [3]
    assert regression["imbalance"]["before"]["straggler_ranks"] == []
    slow = regression["step_time"]["slowest"]
    # medians are those of the generator's ground truth (slowest rank per step)
    assert slow["before"]["median_ns"] == slowest_median(pair["before_truth"])
    assert slow["after"]["median_ns"] == slowest_median(pair["after_truth"])
    assert slow["ci_pct"][0] > 5 and regression["gate"]["failed"] is True
    # the straggler's compute per step grew by about the injected 20 %
    r3 = next(p for p in regression["partition"]["per_rank"] if p["rank"] == 3)
    assert r3["delta"]["compute_ns"] / r3["before"]["compute_ns"] == pytest.approx(0.20, abs=0.03)
    assert regression["findings"]["available"]


def test_identical_inputs_are_neutral_with_zero_deltas(pair):
    r = compare(pair["before"], pair["before"], findings=False, fail_on_regression_pct=0)
    assert r["verdict"]["verdict"] == "neutral"
    assert r["gate"]["failed"] is False
    assert r["step_time"]["slowest"]["delta_ns"] == 0
    assert all(p["delta_ns"] == 0 and p["delta_pct"] == 0 for p in r["step_time"]["per_rank"])
    assert all(s["delta_ns"] == 0 for s in r["step_time"]["per_step"])
    total = r["partition"]["total"]["delta"]
    assert all(v == 0 for k, v in total.items() if v is not None)
    k = r["kernels"]
    assert k["totals"]["delta_ns"] == 0 and k["counts"]["unchanged"] == len(k["rows"]) > 0
    assert all(row["delta_ns"] == 0 for row in k["rows"] + r["collectives"]["rows"])
    assert r["collectives"]["totals"]["before_ns"] > 0


def test_different_rank_counts_compare_common_ranks(pair):
    fewer = pair["tmp"] / "fewer.duckdb"
    shutil.copy(pair["before"], fewer)
    con = duckdb.connect(str(fewer))
    for table in ("ranks", "kernels", "memops", "cuda_api", "nvtx", "gpus"):
        con.execute(f"DELETE FROM {table} WHERE rank >= 2")
    con.close()
    r = compare(pair["before"], fewer, findings=False)
    assert r["ranks"] == {"common": [0, 1], "only_before": [2, 3], "only_after": []}
    assert any("compared on the 2 ranks both have" in n for n in r["notes"])
    assert [p["rank"] for p in r["step_time"]["per_rank"]] == [0, 1]
    assert r["kernels"]["counts"]["added"] == r["kernels"]["counts"]["removed"] == 0


def test_missing_input_is_a_user_error(tmp_path, pair):
    with pytest.raises(UserError, match="does not exist"):
        compare(tmp_path / "nope.duckdb", pair["before"])


# ---------------------------------------------------------------------------------------------
# CLI: formats and the gate's exit codes


def run_cli(*args: str):
    from nsight_analyze.cli import main

    return CliRunner().invoke(main, ["compare", *map(str, args)])


def test_cli_gate_fails_on_regression_with_json(pair):
    res = run_cli(pair["before"], pair["after"], "--format", "json", "--fail-on-regression", "5",
                  "--no-findings")
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    assert doc["schema"] == "nsight-analyze-compare/1" and doc["gate"]["failed"] is True
    assert doc["verdict"]["verdict"] == "regression"


def test_cli_gate_passes_below_threshold_and_writes_html(pair, tmp_path):
    html = tmp_path / "diff.html"
    res = run_cli(pair["before"], pair["after"], "--format", "markdown", "--fail-on-regression", "50",
                  "--no-findings", "-o", html)
    assert res.exit_code == 0, res.output
    assert "## nsight-analyze compare: **regression**" in res.stdout and "| status |" in res.stdout
    assert "gate --fail-on-regression 50: pass" in res.stdout
    page = html.read_text()
    assert 'data-verdict="regression"' in page


def test_cli_identical_traces_folder_passes_gate(pair):
    """A trace folder is ingested into a temporary workspace; same run twice never fails the gate."""
    res = run_cli(pair["tmp"] / "before", pair["before"], "--fail-on-regression", "0", "--no-findings")
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("neutral:")
    assert "ingested 4 file(s)" in res.stdout


def test_cli_bad_setting_is_one_line_error(pair):
    res = run_cli(pair["before"], pair["before"], "--set", "bogus=1")
    assert res.exit_code == 2 and "unknown compare setting" in res.output


# ---------------------------------------------------------------------------------------------
# HTML: self-contained, plotly.js once, trace text escaped


def test_html_escapes_trace_text_and_embeds_plotly_once(regression):
    from plotly.offline import get_plotlyjs

    hostile = '<script>alert(1)</script>"><img src=x onerror=alert(1)>'
    r = json.loads(json.dumps(regression))
    r["kernels"]["rows"][0]["name"] = hostile
    r["collectives"]["rows"][0]["op"] = hostile
    r["notes"].append(hostile)
    r["runs"]["before"]["input"] = hostile
    page = render(r)
    assert "<script>alert(1)" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count(get_plotlyjs()[:200]) == 1
    ours = page.replace(get_plotlyjs(), "")  # the bundle itself mentions its CDN; our markup must not
    assert "<script src" not in ours and "<link" not in ours and "http" not in ours
    for fig in ("fig-partition", "fig-steps", "fig-kernels", "fig-categories"):
        assert f'id="{fig}-data"' in page


# ---------------------------------------------------------------------------------------------
# Real pair against nsys's own stats


def oracle(name: str) -> pd.DataFrame:
    return pd.read_csv(ORACLES / f"nsys-ai__mfu_2gpu_{name}" / "stats_gpukernsum.csv")


@requires_shared
def test_real_pair_deltas_equal_nsys_stats():
    traces = TRACES / "nsys" / "nsys-ai"
    if not (traces / "mfu_2gpu_before.sqlite").exists() or not (ORACLES / "nsys-ai__mfu_2gpu_after").is_dir():
        pytest.skip("mfu_2gpu_before/after traces or their nsys 2022.4 oracles are absent")
    b, a = oracle("before"), oracle("after")
    r = compare(traces / "mfu_2gpu_before.sqlite", traces / "mfu_2gpu_after.sqlite", findings=False)
    k = r["kernels"]
    total = "Total Time (ns)"
    assert k["totals"]["before_ns"] == b[total].sum()  # 535.201 ms
    assert k["totals"]["after_ns"] == a[total].sum()  # 488.835 ms
    # kernels by name: nsys rows are per (name, grid, block); sum them per name
    want = (a.groupby("Name")[total].sum().sub(b.groupby("Name")[total].sum(), fill_value=0))
    got = {row["name"]: row["delta_ns"] for row in k["rows"]}
    assert got == {n: int(v) for n, v in want.items()}
    flash = [n for n in want.index if "flash_fwd_kernel" in n]
    assert sum(got[n] for n in flash) == pytest.approx(-31.6e6, abs=0.1e6)
    assert k["rows"][0]["name"] in flash  # the largest change is ranked first
    nccl = {s: df.loc[df["Name"].str.contains("nccl"), total].sum()
            for s, df in (("before", b), ("after", a))}
    c = r["collectives"]["totals"]
    assert (c["before_ns"], c["after_ns"]) == (nccl["before"], nccl["after"])  # 25.4 -> 33.7 ms
    assert k["counts"]["added"] == k["counts"]["removed"] == 0


def test_schema_doc_lists_every_top_level_key(regression):
    doc = (Path(__file__).resolve().parents[1] / "docs" / "compare.md").read_text()
    for key in regression:
        assert f"`{key}`" in doc, key


@pytest.mark.browser
def test_html_draws_in_chromium_offline_without_running_trace_text(regression, tmp_path):
    """JavaScript runs without errors, every figure draws, hostile text never runs, no network."""
    import shutil as sh

    chromium = sh.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if chromium is None:
        pytest.skip("chromium is missing")
    r = json.loads(json.dumps(regression))
    r["kernels"]["rows"][0]["name"] = '<img src=x onerror=alert(1)> <script>alert(2)</script>'
    path = tmp_path / "diff.html"
    path.write_text(render(r))
    seen: dict[str, list] = {"errors": [], "dialogs": [], "requests": []}
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        try:
            pg = browser.new_page(viewport={"width": 1400, "height": 1000})
            pg.on("pageerror", lambda e: seen["errors"].append(str(e)))
            pg.on("console", lambda m: seen["errors"].append(m.text) if m.type == "error" else None)
            pg.on("dialog", lambda d: (seen["dialogs"].append(d.message), d.dismiss()))

            def route(rt):
                seen["requests"].append(rt.request.url)
                rt.continue_() if rt.request.url.startswith("file:") else rt.abort()

            pg.route("**/*", route)
            pg.goto(path.as_uri())
            pg.wait_for_function("document.body.dataset.figuresRendered", timeout=120_000)
            assert pg.evaluate("document.body.dataset.figuresRendered") == "4"
            assert pg.evaluate("document.querySelectorAll('.fig .main-svg').length") >= 4
            cell = pg.evaluate("document.querySelector('#kernels tbody td:nth-child(2)').textContent")
            assert cell.startswith("<img src=x")
        finally:
            browser.close()
    assert seen["errors"] == [] and seen["dialogs"] == []
    assert [u for u in seen["requests"] if not u.startswith("file:")] == []
