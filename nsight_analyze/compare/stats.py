"""The statistics of a comparison: step-time samples, and the p-values of the kernels' rank tests.

Step times (a few hundred numbers per run) go to scipy.stats: `mannwhitneyu` (two-sided,
normal approximation with tie and continuity corrections) and `bootstrap` (percentile interval
of the relative change of the median, the runs resampled independently). The per-kernel
duration test is not scipy's: it ranks every kernel instance of both runs (millions of rows)
within each launch configuration and combines the configurations (van Elteren's stratified
test, which scipy.stats does not offer), so it runs in SQL where the instances are
(kernels.py `_duration_tests`); only its p-values, one per kernel, are computed here, with
scipy's normal distribution. tests/test_compare.py checks that SQL against scipy.stats.

scipy is imported inside the functions: `compare --help` and the modules that only need the
settings do not load it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


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


def mann_whitney_p(x: np.ndarray, y: np.ndarray) -> float | None:
    """Two-sided Mann-Whitney U p-value (normal approximation, tie and continuity corrected).

    Why this test: step times are skewed (warm-up, occasional stalls); a rank test needs no
    normality and is robust to a few outliers.
    """
    from scipy.stats import mannwhitneyu

    if len(x) == 0 or len(y) == 0:
        return None
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if np.ptp(np.concatenate([x, y])) == 0:  # all tied: no variance, nothing differs
        return 1.0
    res = mannwhitneyu(y, x, alternative="two-sided", method="asymptotic", use_continuity=True)
    return float(min(1.0, res.pvalue))


def _relative_median_change(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """median(y) / median(x) - 1 along `axis` (0 where BEFORE's median is not positive)."""
    mx = np.median(x, axis=axis)
    my = np.median(y, axis=axis)
    return np.where(mx > 0, my / np.where(mx > 0, mx, 1.0) - 1.0, 0.0)


def _bootstrap(x: np.ndarray, y: np.ndarray, cfg: dict[str, float], stream: int) -> Any:
    """scipy's percentile bootstrap of median(y*) / median(x*) - 1, B resamples, PCG64 seeded
    with [seed, stream]: x* then y* drawn per batch, so the same inputs give the same numbers."""
    from scipy.stats import bootstrap

    return bootstrap(
        (x, y),
        _relative_median_change,
        n_resamples=int(cfg["bootstrap_resamples"]),
        vectorized=True,
        method="percentile",
        confidence_level=float(cfg["confidence_level"]),
        rng=np.random.default_rng([int(cfg["seed"]), stream]),
    )


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
    boot = _bootstrap(x, y, cfg, stream)
    rel = boot.bootstrap_distribution
    lo, hi = boot.confidence_interval
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


def _p_values(stat: pd.Series, var: pd.Series, cc: pd.Series) -> np.ndarray:
    """Two-sided normal-approximation p-values of the rank statistics (one per kernel, not per event)."""
    from scipy.stats import norm

    v = pd.to_numeric(var, errors="coerce").to_numpy(dtype=float)
    d = np.maximum(
        np.abs(pd.to_numeric(stat, errors="coerce").to_numpy(dtype=float))
        - pd.to_numeric(cc, errors="coerce").fillna(0).to_numpy(dtype=float),
        0.0,
    )
    z = np.divide(d, np.sqrt(np.where(v > 0, v, 1.0)), out=np.zeros_like(d), where=v > 0)
    p = 2.0 * norm.sf(z)
    return np.where(np.isnan(v), np.nan, np.where(v > 0, p, 1.0))
