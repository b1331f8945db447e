"""The peak table (data/gpus.csv): one GPU model's dense peaks by name, and the checks of --gpu.

Why its own module: every other way to a peak (gpus/hardware.py's derivation and identification,
gpus/__init__.py's resolution and per-rank rows, the DCGM cross-check, the roofline of hardware-counter
files) starts from this table or the `Peak` it returns. Names are matched on whole tokens, most
specific (longest) alias first, so a GH200 is not an H200 and an A10G not an A10 (gpus/__init__.py's
docstring lists the ways a denominator goes wrong). Read with the csv module: no pandas.
"""

from __future__ import annotations

import csv
import functools
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import UserError

DATA = Path(__file__).parent.parent / "data" / "gpus.csv"

#: Precisions with a dense peak column in data/gpus.csv (TFLOP/s; TOPS for int8).
PRECISIONS = ("fp64", "fp64_tc", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")
#: Precisions executed on tensor cores: Hopper/Blackwell specs use the lower tensor clock.
TENSOR_PRECISIONS = ("tf32", "bf16", "fp16", "fp8", "int8")
DEFAULT_PRECISION = "bf16"

#: How a user finds the names --gpu accepts (said in every error and unknown-peak reason).
LIST_HINT = "`nsight-analyze gpus --list-models` lists the names --gpu accepts"


@dataclass
class Peak:
    """Dense peaks of one GPU and how they were obtained."""

    source: str  # table | derived | given | assumed | override | unknown
    reason: str
    model: str | None = None
    tflops: dict[str, float | None] = field(default_factory=dict)  # precision -> dense TFLOP/s
    mem_bw_gbs: float | None = None
    sm_count: int | None = None
    boost_mhz: float | None = None
    tensor_mhz: float | None = None
    confidence: str | None = None

    def precision_of(self, precision: str = DEFAULT_PRECISION) -> str:
        """The precision whose dense peak `peak_flops(precision)` returns, for every label.

        Why: Volta and Turing (V100, T4: sm_70, sm_75) have FP16 tensor cores but no BF16 ones
        (gpu-peaks.md §2.1: T4 "65 (FP16, no BF16)"), so the default bf16 asked of them is
        answered with their dense FP16 tensor peak, and what is shown must say fp16, not bf16.
        """
        if precision == "bf16" and self.tflops.get("bf16") is None and self.tflops.get("fp16") is not None:
            return "fp16"
        return precision

    def peak_flops(self, precision: str = DEFAULT_PRECISION) -> float | None:
        """FLOP/s for a precision; bf16 falls back to fp16 on parts without BF16 (V100, T4)."""
        value = self.tflops.get(self.precision_of(precision))
        return None if value is None else value * 1e12

    def ridge(self, precision: str = DEFAULT_PRECISION) -> float | None:
        """FLOP/byte where the memory roof meets the compute roof."""
        flops = self.peak_flops(precision)
        if flops is None or not self.mem_bw_gbs:
            return None
        return flops / (self.mem_bw_gbs * 1e9)


_TEXT_COLUMNS = ("model", "match", "arch", "cc", "confidence", "note")


@functools.lru_cache(maxsize=1)
def rows() -> tuple[dict[str, Any], ...]:
    """The peak table as shipped, one dict per model: numbers as floats, blanks as None.

    Read with the csv module: resolving a GPU's peak happens in every ingest and must not
    import pandas (half a second) for a 40-row file."""
    with open(DATA, newline="", encoding="utf-8") as fh:
        return tuple(
            {k: (v or None) if k in _TEXT_COLUMNS else (float(v) if v else None) for k, v in row.items()}
            for row in csv.DictReader(fh)
        )


@functools.lru_cache(maxsize=1)
def _aliases() -> list[tuple[str, int]]:
    """(alias, row index), longest alias first: the most specific name wins."""
    out = []
    for idx, row in enumerate(rows()):
        for alias in str(row["match"]).split("|"):
            out.append((alias.strip().lower(), idx))
    return sorted(out, key=lambda a: -len(a[0]))


def _normalise(name: str) -> str:
    return re.sub(r"[\s_]+", " ", name.strip().lower())


def _contains_token(haystack: str, needle: str) -> bool:
    """`needle` occurs in `haystack` not glued to letters/digits (A10 is not in A100 or A10G)."""
    pattern = r"(?<![a-z0-9])" + re.escape(needle) + r"(?![a-z0-9])"
    return re.search(pattern, haystack) is not None


def row_peak(idx: int, source: str, reason: str) -> Peak:
    """The Peak of table row `idx` (in `rows()`), labelled `source` with `reason`."""
    row = rows()[idx]
    number = lambda col: None if row[col] is None else float(row[col])  # noqa: E731
    return Peak(
        source=source,
        reason=reason,
        model=str(row["model"]),
        tflops={p: number(p) for p in PRECISIONS},
        mem_bw_gbs=number("mem_bw_gbs"),
        sm_count=None if row["sm_count"] is None else int(row["sm_count"]),
        boost_mhz=number("boost_mhz"),
        tensor_mhz=number("tensor_mhz"),
        confidence=str(row["confidence"]),
    )


def model_peak(model: str) -> Peak:
    """The table row whose `model` is exactly this (used for family guesses and tests)."""
    for idx, row in enumerate(rows()):
        if row["model"] == model:
            return row_peak(idx, "table", f"table row {model}")
    raise KeyError(model)


def lookup(name: str | None) -> Peak | None:
    """Table row for an NVML/nsys GPU name, most specific alias first; None if unknown."""
    if not name:
        return None
    norm = _normalise(name)
    for alias, idx in _aliases():
        if _contains_token(norm, alias):
            model = rows()[idx]["model"]
            return row_peak(idx, "table", f"name {name!r} matched alias {alias!r} -> {model}")
    return None


def unknown_gpu_message(gpu: str) -> str:
    """The one-line error for a --gpu name that matches no table row."""
    return f"unknown GPU {gpu!r} for --gpu: {LIST_HINT} (or give the peak with --peak-tflops)"


def validate_gpu(gpu: str | None) -> None:
    """Raise UserError early for an unknown --gpu, before work whose errors would be swallowed."""
    if gpu is not None and lookup(gpu) is None:
        raise UserError(unknown_gpu_message(gpu))


def given_peak(gpu: str, traced_name: str | None = None) -> Peak:
    """The table row of a user-stated model (--gpu); says so when the trace names another GPU."""
    peak = lookup(gpu)
    if peak is None:
        raise UserError(unknown_gpu_message(gpu))
    reason = f"--gpu {gpu!r} -> table row {peak.model}"
    traced = lookup(traced_name)
    if traced_name and (traced is None or traced.model != peak.model):
        reason += f" (the trace names {traced_name!r})"
    return replace(peak, source="given", reason=reason)


def validate_precision(precision: str) -> None:
    """A precision of the peak table (PRECISIONS), else one line naming them."""
    if precision not in PRECISIONS:
        raise UserError(f"unknown precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
