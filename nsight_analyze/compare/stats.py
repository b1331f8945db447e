"""The statistics of a comparison: step-time samples, and the p-values of the kernels' rank tests.

Step times (a few hundred numbers per run): a two-sided Mann-Whitney U test (normal
approximation with tie and continuity corrections) and a percentile bootstrap of the relative
change of the median (2000 resamples, the runs resampled independently, PCG64 seeded with
[seed, stream]). Both are scipy.stats' (`mannwhitneyu(method="asymptotic")`, `bootstrap(
method="percentile", vectorized=True)`, `quantile`) step for step: the same index draws from
the same generator, the same median and interpolation, so the bootstrap is scipy's to the last
bit (tests/test_compare_stored.py checks both against scipy.stats). The p-values use scipy's
normal distribution function's algorithm (cephes `ndtr`) over the C library's erf/erfc instead
of cephes' own, so they agree with scipy's to 1e-10 relative (6e-11 at most over 300k random
values: cephes' erfc in the far tail). Why not call scipy: importing even scipy.special costs
0.4 s of a 3.5 s comparison of 64 ranks, scipy.stats about a second, and compare runs one
bootstrap per rank (64 on a 64-rank job): scipy's per-call overhead and its gather-then-partition
median made the step times the slowest part of a large comparison. Here a resample's median is
read from the sorted sample by sorting the resampled *positions* (small integers: numpy's radix
sort), not the values.

The per-kernel duration test is not scipy's: it ranks every kernel instance of both runs
(millions of rows) within each launch configuration and combines the configurations (van
Elteren's stratified test, which scipy.stats does not offer), from the instances counted per
distinct duration in SQL (kernels.py `_duration_tests`); only its p-values, one per kernel, are
computed here, with the same normal distribution function (`_ndtr`, what `scipy.stats.norm.sf`
evaluates at -x). tests/test_compare.py checks that SQL against scipy.stats.

scipy is the tests' oracle, not a dependency.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np


def _summary(x: np.ndarray) -> dict[str, Any]:
    if len(x) == 0:
        return {"n": 0, "median_ns": None, "p10_ns": None, "p90_ns": None, "mean_ns": None}
    q10, q50, q90 = np.quantile(x, [0.1, 0.5, 0.9])
    return {
        "n": int(len(x)),
        "median_ns": float(q50),
        "p10_ns": float(q10),
        "p90_ns": float(q90),
        "mean_ns": float(x.mean()),
    }


def _average_ranks(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Average ranks (1-based, ties share their mean rank) and the tie counts, as scipy.stats'
    `_rankdata(v, "average", return_ties=True)` computes them (counts at each distinct value's
    first sorted position, zeros elsewhere)."""
    n = len(v)
    j = np.argsort(v, kind="stable")
    ordinal = np.arange(1, n + 1, dtype=float)
    s = v[j]
    first = np.concatenate([np.ones(1, dtype=bool), s[:-1] != s[1:]])
    counts = np.diff(np.arange(n)[first], append=n)
    ranks = np.empty(n, dtype=float)
    ranks[j] = np.repeat(ordinal[first] + (counts.astype(float) - 1) / 2, counts)
    ties = np.zeros(n, dtype=float)
    ties[first] = counts
    return ranks, ties


def _ndtr(x: np.ndarray | float) -> np.ndarray:
    """The standard normal distribution function, as scipy.special.ndtr computes it (cephes),
    with the C library's erf and erfc. One Python call per value: its inputs are one per kernel
    or sample, not per event."""
    a = np.asarray(x, dtype=float)
    return np.array([_ndtr_one(v) for v in a.ravel().tolist()], dtype=float).reshape(a.shape)


def _ndtr_one(a: float) -> float:
    """cephes ndtr: 0.5 + 0.5 erf(a/sqrt 2) near 0, else 0.5 erfc(|a|/sqrt 2) or its complement."""
    x = a * 0.5**0.5
    if x != x:  # NaN
        return x
    if abs(x) < 0.5**0.5:
        return 0.5 + 0.5 * math.erf(x)
    y = 0.5 * math.erfc(abs(x))
    return 1.0 - y if x > 0 else y


def mann_whitney_p(x: np.ndarray, y: np.ndarray) -> float | None:
    """Two-sided Mann-Whitney U p-value (normal approximation, tie and continuity corrected).

    Why this test: step times are skewed (warm-up, occasional stalls); a rank test needs no
    normality and is robust to a few outliers. The arithmetic is scipy.stats.mannwhitneyu(y, x,
    alternative="two-sided", method="asymptotic", use_continuity=True)'s, in its order.
    """
    if len(x) == 0 or len(y) == 0:
        return None
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    xy = np.concatenate([y, x])
    if np.ptp(xy) == 0:  # all tied: no variance, nothing differs
        return 1.0
    n1, n2 = len(y), len(x)
    ranks, t = _average_ranks(xy)
    u1 = np.sum(ranks[:n1]) - n1 * (n1 + 1) / 2
    u = np.maximum(u1, n1 * n2 - u1)
    n = n1 + n2
    s = np.sqrt(n1 * n2 / 12 * ((n + 1) - np.sum(t**3 - t) / (n * (n - 1))))
    z = (u - n1 * n2 / 2 - 0.5) / s
    p = np.clip(_ndtr(-z) * 2, 0.0, 1.0)
    return float(min(1.0, p))


def _relative_median_change(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """median(y) / median(x) - 1 along `axis` (0 where BEFORE's median is not positive)."""
    mx = np.median(x, axis=axis)
    my = np.median(y, axis=axis)
    return _relative(mx, my)


def _relative(mx: np.ndarray, my: np.ndarray) -> np.ndarray:
    return np.where(mx > 0, my / np.where(mx > 0, mx, 1.0) - 1.0, 0.0)


def _resampled_medians(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """np.median(x[idx], axis=-1), one median per row of resample indices `idx`.

    How: a resample's values in order are the sorted sample at the resampled positions in order,
    so the positions (small integers, radix-sorted by numpy) are sorted instead of the values;
    the middle one or two give the median, averaged as np.median averages them."""
    n = len(x)
    if n > 65536:
        return np.median(x[idx], axis=-1)
    order = np.argsort(x, kind="stable")
    xs = x[order]
    pos = np.empty(n, dtype=np.uint8 if n <= 256 else np.uint16)
    pos[order] = np.arange(n)
    p = np.sort(pos[idx], axis=-1, kind="stable")
    h = n // 2
    if n % 2:
        return xs[p[:, h]]
    return (xs[p[:, h - 1]] + xs[p[:, h]]) / 2


def _quantile_linear(v: np.ndarray, p: np.ndarray) -> np.ndarray:
    """scipy.stats.quantile(v, p, method="linear") of a 1-d array (Hyndman and Fan's type 7)."""
    y = np.sort(v)
    n = len(y)
    jg = p * n + (1 - p)
    jp1 = jg // 1
    j = jp1 - 1
    g = jg % 1
    g = np.where(j < 0, 0.0, g)
    j = np.clip(j, 0.0, n - 1)
    jp1 = np.clip(jp1, 0.0, n - 1)
    return (1 - g) * y[j.astype(np.int64)] + g * y[jp1.astype(np.int64)]


def _bootstrap(
    x: np.ndarray, y: np.ndarray, cfg: dict[str, float], stream: int
) -> tuple[np.ndarray, np.ndarray]:
    """(bootstrap distribution, percentile interval) of median(y*) / median(x*) - 1: B resamples,
    PCG64 seeded with [seed, stream], x* then y* drawn as scipy.stats.bootstrap draws them (one
    batch), so the same inputs give the same numbers, and scipy's."""
    rng = np.random.default_rng([int(cfg["seed"]), stream])
    b = int(cfg["bootstrap_resamples"])
    mx = _resampled_medians(x, rng.integers(0, len(x), (b, len(x)), dtype=np.int64, endpoint=False))
    my = _resampled_medians(y, rng.integers(0, len(y), (b, len(y)), dtype=np.int64, endpoint=False))
    dist = _relative(mx, my)
    alpha = np.asarray((1 - float(cfg["confidence_level"])) / 2, dtype=dist.dtype)
    return dist, _quantile_linear(dist, np.stack([alpha, 1 - alpha]))


def compare_samples(x: np.ndarray, y: np.ndarray, cfg: dict[str, float], stream: int = 0) -> dict[str, Any]:
    """Before/after summaries, the median difference with its bootstrap CI, and the U-test p-value."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    out: dict[str, Any] = {"before": _summary(x), "after": _summary(y)}
    mb, ma = out["before"]["median_ns"], out["after"]["median_ns"]
    out["delta_ns"] = None if mb is None or ma is None else ma - mb
    out["delta_pct"] = None if out["delta_ns"] is None or not mb else 100.0 * out["delta_ns"] / mb
    out.update(
        {
            "ci_pct": None,
            "ci_ns": None,
            "p_value": None,
            "p_increase": None,
            "p_decrease": None,
            "p_within_min_effect": None,
        }
    )
    if min(len(x), len(y)) < int(cfg["min_samples"]) or not mb:
        return out
    rel, (lo, hi) = _bootstrap(x, y, cfg, stream)
    eff = cfg["min_effect_pct"] / 100.0
    out.update(
        {
            "ci_pct": [float(100.0 * lo), float(100.0 * hi)],
            "ci_ns": [float(lo * mb), float(hi * mb)],
            "p_value": mann_whitney_p(x, y),
            "p_increase": float((rel > 0).mean()),
            "p_decrease": float((rel < 0).mean()),
            "p_within_min_effect": float((np.abs(rel) < eff).mean()),
        }
    )
    return out


def _p_values(
    stat: Sequence[float | None], var: Sequence[float | None], cc: Sequence[float | None]
) -> np.ndarray:
    """Two-sided normal-approximation p-values of the rank statistics (one per kernel, not per event);
    a missing value (None) is NaN."""
    v = _floats(var)
    c = _floats(cc)
    d = np.maximum(np.abs(_floats(stat)) - np.where(np.isnan(c), 0.0, c), 0.0)
    z = np.divide(d, np.sqrt(np.where(v > 0, v, 1.0)), out=np.zeros_like(d), where=v > 0)
    p = 2.0 * _ndtr(-z)
    return np.where(np.isnan(v), np.nan, np.where(v > 0, p, 1.0))


def _floats(values: Sequence[float | None]) -> np.ndarray:
    return np.array([np.nan if x is None else x for x in values], dtype=float)
