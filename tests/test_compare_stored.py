"""compare reads stored per-rank results instead of every kernel: its work-rate shares from
`kernel_window_shares` (equal to shares computed here in numpy from the raw `kernels` and `steps`
rows), its duration counts from `kernel_kinds` + `kernel_duration_counts` (equal to a GROUP BY
over the raw kernels here); and what it reports from them equals what it computes from the
kernels themselves (its path for other trims, or a workspace without those tables). Its
statistics equal scipy.stats' to the last bit (compare/stats.py reimplements them).
"""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest

from nsight_analyze.compare import compare, resolve_settings
from nsight_analyze.compare import kernels as k_mod
from nsight_analyze.compare import work_rate as wr_mod
from nsight_analyze.compare.settings import CONFIG, DEFAULTS, TRIM_LEVELS


@pytest.fixture(scope="module")
def job(synth_job):
    """A small synthetic job (2 ranks x 6 steps) ingested once; its workspace path."""
    return synth_job((), ranks=2, gpus_per_node=2, steps=6, seed=11).db


@pytest.fixture(scope="module")
def other(synth_job):
    """Another seed of the same job, one rank 30 % slower (kernels differ in count and duration)."""
    return synth_job(["straggler=1:+30"], ranks=2, gpus_per_node=2, steps=6, seed=12).db


def _share(s: np.ndarray, e: np.ndarray, lo: np.ndarray | float, hi: np.ndarray | float) -> np.ndarray:
    """An instance's share of [lo, hi): overlap / duration; a zero-length one 1 if it starts inside."""
    d = e - s
    ov = np.clip(np.minimum(e, hi) - np.maximum(s, lo), 0, None)
    return np.where(d > 0, ov / np.where(d > 0, d, 1), ((s >= lo) & (s < hi)).astype(float))


def test_stored_shares_equal_shares_of_the_raw_kernels(job):
    # Ground truth: the raw kernels and steps of the workspace, the shares computed in numpy with
    # the definition of queries/kernels/kernel_window_shares.sql's header (span = first step start to last
    # step end; cut points span start + length x frac, span end - length x frac).
    con = duckdb.connect(str(job), read_only=True)
    try:
        k = con.execute(
            f"SELECT rank, name, {', '.join(CONFIG)}, start_ns, end_ns, category FROM kernels"
        ).df()
        w = con.execute("SELECT rank, min(start_ns) AS lo, max(end_ns) AS hi FROM steps GROUP BY rank").df()
        got = con.execute("SELECT * FROM kernel_window_shares").df()
    finally:
        con.close()
    assert len(got) > 0
    k = k.merge(w, on="rank")
    k = k[(k["end_ns"] >= k["lo"]) & (k["start_ns"] < k["hi"]) & (k["category"] != "comms")]
    s, e = k["start_ns"].to_numpy(float), k["end_ns"].to_numpy(float)
    lo, hi = k["lo"].to_numpy(float), k["hi"].to_numpy(float)
    k = k.assign(d=e - s, span=_share(s, e, lo, hi))
    k["span_ns"] = k["d"] * k["span"]
    # compare's default fractions: rate_trim_pct x level / (TRIM_LEVELS - 1), level 1..4
    fracs = [DEFAULTS["rate_trim_pct"] / 100.0 * i / (TRIM_LEVELS - 1) for i in range(1, TRIM_LEVELS)]
    for i, f in enumerate(fracs, start=1):
        k[f"f{i}"] = _share(s, e, lo, lo + (hi - lo) * f)
        k[f"b{i}"] = _share(s, e, hi - (hi - lo) * f, hi)
    keys = ["rank", "name", *CONFIG]
    want = k.groupby(keys, dropna=False).agg(
        instances=("d", "size"),
        total_ns=("d", "sum"),
        span_ns=("span_ns", "sum"),
        span_share=("span", "sum"),
        **{c: (c, "sum") for c in k.columns if c[0] in "fb" and c[1:].isdigit()},
    )
    assert sorted(got["trim_level"].unique()) == list(range(1, TRIM_LEVELS))
    assert len(got) == len(want) * (TRIM_LEVELS - 1)  # one row per kind and trim level
    for level, f in enumerate(fracs, start=1):
        g = got[got["trim_level"] == level].set_index(keys).sort_index()
        assert np.allclose(g["trim_frac"], f, rtol=1e-15)
        wl = want.sort_index()
        assert (g["instances"].to_numpy() == wl["instances"].to_numpy()).all()
        assert (g["total_ns"].to_numpy() == wl["total_ns"].to_numpy()).all()
        for col, ref in (
            ("span_ns", "span_ns"),
            ("span_share", "span_share"),
            ("front_share", f"f{level}"),
            ("back_share", f"b{level}"),
        ):
            assert np.allclose(g[col].to_numpy(float), wl[ref].to_numpy(float), rtol=1e-9, atol=1e-9), col
    # the synthetic steps do not start at the first kernel: some shares are fractions (a real test)
    assert (got["front_share"] > 0).any()


def test_work_rate_from_the_stored_table_equals_clipping_every_kernel(job, monkeypatch):
    # Ground truth: compare's own clipping of every kernel (its path for other trims), forced here.
    stored = compare(job, job, findings=False)["work_rate"]
    monkeypatch.setattr(wr_mod, "_stored_at", lambda *a: False)
    raw = compare(job, job, findings=False)["work_rate"]
    assert stored["comparable"] == raw["comparable"]
    for side in ("before", "after"):
        for key, v in raw[side].items():
            assert stored[side][key] == pytest.approx(v, rel=1e-12, nan_ok=True), (side, key)
    assert stored["range_pct"] == pytest.approx(raw["range_pct"], abs=1e-9)
    assert [r["rank"] for r in stored["per_rank"]] == [r["rank"] for r in raw["per_rank"]]
    for a, b in zip(stored["per_rank"], raw["per_rank"]):
        assert a["before_rate"] == pytest.approx(b["before_rate"], rel=1e-12)


def test_other_trims_do_not_read_the_stored_table(job, monkeypatch):
    # The stored shares are at the default trims; rate_trim_pct 20 must clip the kernels itself.
    seen = []
    real = wr_mod._stored_at
    monkeypatch.setattr(wr_mod, "_stored_at", lambda *a: seen.append(real(*a)) or seen[-1])
    compare(job, job, settings={"rate_trim_pct": 20}, findings=False)
    assert seen == [False]
    seen.clear()
    compare(job, job, findings=False)
    assert seen == [True]


def test_statistics_equal_scipy():
    # Oracle: scipy.stats itself (bootstrap percentile interval, mannwhitneyu asymptotic), on
    # random samples of odd, even and > 256 sizes, with and without ties.
    from scipy import stats

    from nsight_analyze.compare import stats as S

    rng = np.random.default_rng(3)
    for trial in range(24):
        nx, ny = (int(v) for v in rng.integers(2, 600, 2))
        x, y = rng.normal(100, 10, nx), rng.normal(102, 10, ny)
        if trial % 3 == 0:
            x, y = x.round(), y.round()  # ties
        cfg = resolve_settings({"bootstrap_resamples": 300 + trial, "seed": trial, "confidence_level": 0.9})
        ref = stats.bootstrap(
            (x, y),
            S._relative_median_change,
            n_resamples=300 + trial,
            vectorized=True,
            method="percentile",
            confidence_level=0.9,
            rng=np.random.default_rng([trial, 5]),
        )
        dist, (lo, hi) = S._bootstrap(x, y, cfg, 5)
        assert np.array_equal(dist, ref.bootstrap_distribution)
        assert (lo, hi) == (ref.confidence_interval.low, ref.confidence_interval.high)
        p = stats.mannwhitneyu(y, x, alternative="two-sided", method="asymptotic", use_continuity=True).pvalue
        # p-values: scipy's normal distribution function evaluated with the C library's erf/erfc
        # (stats.py says why), so equal to 1e-10 relative, not to the bit
        assert S.mann_whitney_p(x, y) == pytest.approx(min(1.0, float(p)), rel=1e-10, abs=0)
    z = np.concatenate([rng.normal(0, 3, 40), [0.0, 40.0, np.inf]])
    got = S._p_values(pd.Series(z), pd.Series(np.ones(len(z))), pd.Series(np.zeros(len(z))))
    assert np.allclose(got, 2.0 * stats.norm.sf(np.abs(z)), rtol=1e-10, atol=0)


def test_stored_duration_counts_equal_a_group_by_over_the_raw_kernels(job):
    # Ground truth: the raw kernels of the workspace, counted per rank, name, category, launch
    # configuration and duration by this SQL; the stored tables joined on their key must equal it.
    con = duckdb.connect(str(job), read_only=True)
    cols = f"rank, name, category, {', '.join(CONFIG)}"
    try:
        want = con.execute(
            f"SELECT {cols}, end_ns - start_ns AS d, count(*) AS n FROM kernels GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        got = con.execute(
            f"SELECT {cols}, duration_ns AS d, c.instances AS n FROM kernel_duration_counts c "
            "JOIN kernel_kinds USING (rank, kind) ORDER BY ALL"
        ).fetchall()
        totals = con.execute(
            f"SELECT {cols}, count(*), sum(end_ns - start_ns) FROM kernels GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        kinds = con.execute(f"SELECT {cols}, instances, total_ns FROM kernel_kinds ORDER BY ALL").fetchall()
        job_want = con.execute(
            f"SELECT {cols[6:]}, end_ns - start_ns AS d, count(*) AS n FROM kernels GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        job_got = con.execute(
            f"SELECT {cols[6:]}, t.duration_ns AS d, t.instances AS n FROM kernel_duration_totals t "
            f"JOIN (SELECT DISTINCT kind, {cols[6:]} FROM kernel_kinds) USING (kind) ORDER BY ALL"
        ).fetchall()
    finally:
        con.close()
    assert len(want) > 10 and got == want
    assert kinds == totals
    assert job_got == job_want  # the job's totals: the same counts over all ranks


@pytest.fixture(scope="module")
def wider(synth_job):
    """The job on 3 ranks: compared with a 2-rank run, only ranks 0-1 are common (per-rank counts)."""
    return synth_job((), ranks=3, gpus_per_node=3, steps=6, seed=13).db


@pytest.mark.parametrize("pair", ["same", "different", "fewer ranks"])
def test_kernels_from_the_stored_counts_equal_reading_every_kernel(job, other, wider, monkeypatch, pair):
    # Ground truth: compare's kernels and their rank tests computed from the raw kernels (its path
    # for a workspace without the stored counts), forced here.
    after = {"same": job, "different": other, "fewer ranks": wider}[pair]
    stored = compare(job, after, findings=False)["kernels"]
    monkeypatch.setattr(k_mod, "_stored_kinds", lambda *a: False)
    raw = compare(job, after, findings=False)["kernels"]
    assert stored["counts"] == raw["counts"] and stored["totals"] == pytest.approx(raw["totals"])
    assert [r["name"] for r in stored["rows"]] == [r["name"] for r in raw["rows"]]
    for a, b in zip(stored["rows"], raw["rows"]):
        assert a.keys() == b.keys()
        for key, v in b.items():
            if isinstance(v, float):
                assert a[key] == pytest.approx(v, rel=1e-9, abs=1e-12, nan_ok=True), (a["name"], key)
            else:
                assert a[key] == v, (a["name"], key)
    if pair == "different":  # a real test: the injected straggler makes some kernel slower
        assert stored["counts"]["slower"] + stored["counts"]["faster"] > 0
