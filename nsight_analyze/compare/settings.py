"""Compare's named settings and the vocabularies of its JSON (docs/compare.md)."""

from __future__ import annotations

import math
from typing import Any

from ..errors import UserError
from ..partition import COMMS, COPIES_TOTAL, IDLE_PARTS, MEMORY_PARTS
from ..partition import PARTS as TILING

SCHEMA = "nsight-analyze-compare/1"

# Named, documented defaults (docs/compare.md "Statistics"); compare(settings=...) overrides them.
DEFAULTS: dict[str, float | int] = {
    "confidence_level": 0.95,  # two-sided level of the bootstrap intervals
    "bootstrap_resamples": 2000,  # resamples per interval
    "seed": 0,  # bootstrap RNG seed: same inputs, same numbers
    "alpha": 0.05,  # Mann-Whitney significance level
    "min_effect_pct": 1.0,  # smaller median changes are `neutral` whatever the p-value
    "min_samples": 3,  # steps per run needed for a confidence interval
    "rate_trim_pct": 10.0,  # without steps: work rate also on windows trimmed by up to this % per end
    "min_rate_coverage_pct": 50.0,  # without steps: matched kernels' share of kernel time needed
    "finding_change_pct": 10.0,  # finding magnitude changes smaller than this % are `unchanged`
    "resolved_max_ratio": 0.5,  # resolved: below the rule's threshold AND at most this x the before
}
TRIM_LEVELS = 5  # trims 0, 1/4, ..., 4/4 of rate_trim_pct at each end: 25 sub-windows per run

# The partition compare reports (the parts that tile the window, then the idle split) and the
# columns it reports beside them; the column names come from partition.py.
PARTS = (*TILING, *IDLE_PARTS)
COMPANIONS = ("window_ns", *COMMS)
# memory_ns split (docs/metrics.md "Time partition"): MEMORY_PARTS, memory-bound kernels and copies
# (they sum to memory_ns, which PARTS keeps as the total), then all copy time, hidden or not.
# Reported beside the parts, so that a change of memory time says whether kernels or copies made it.
MEMORY = (*MEMORY_PARTS, *COPIES_TOTAL)
SIDES = ("before", "after")
STATUSES = ("added", "removed", "faster", "slower", "unchanged", "reshaped")
# Kernel launch configuration: durations are compared within one configuration (a kernel name
# often runs at several shapes, and a change in their mix is not a change of speed).
CONFIG = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")


def resolve_settings(overrides: dict[str, Any] | None) -> dict[str, float]:
    cfg = dict(DEFAULTS)
    for k, v in (overrides or {}).items():
        if k not in DEFAULTS:
            raise UserError(f"unknown compare setting {k!r}; known: {', '.join(sorted(DEFAULTS))}")
        cfg[k] = int(v) if isinstance(DEFAULTS[k], int) else float(v)
        if not math.isfinite(cfg[k]) or cfg[k] < 0:  # NaN compares false: every test would pass
            raise UserError(f"compare setting {k}={v!r} must be a finite number >= 0")
    if not 0 < cfg["confidence_level"] < 1:
        raise UserError("confidence_level must be between 0 and 1")
    if cfg["bootstrap_resamples"] < 1:
        raise UserError("bootstrap_resamples must be at least 1")
    if cfg["min_samples"] < 2:  # scipy.stats.bootstrap needs two: one value has no spread to resample
        raise UserError("min_samples must be at least 2 (a bootstrap resamples two or more step windows)")
    return cfg
