"""Dense peak throughput of a GPU: table lookup, derivation, or a flagged assumption.

MFU and HFU are only as good as their denominator, and the usual ways to get it wrong
are listed in ../shared/docs/gpu-peaks.md §1: sparse datasheet numbers, the boost clock
instead of the (lower) clock behind Hopper/Blackwell tensor specs, and substring
matching that takes a GH200 for an H200 or an A10G for an A10. So:

* the table is data (`data/gpus.csv`, dense TFLOP/s per precision), matched on whole
  tokens, most specific (longest) alias first;
* an unknown model is derived from SM count x clock x FLOP/clk/SM of its architecture
  (gpu-peaks.md §3; the rates and derates are in gpus/arch.py), with the tensor-clock derate,
  and labelled ``derived``;
* a GPU the trace does not name (ROCm's PyTorch profiler writes an empty ``name`` for an
  MI300X) but whose SM/CU count, compute capability and memory fit exactly one table model
  (or several with the same peaks: an MI210 and one GCD of an MI250) is that model, labelled
  ``identified`` with the properties that identified it; properties that fit models of
  different peaks (an MI350X and an MI355X differ only in clock) identify nothing;
* with no GPU information at all, an environment hint (``PEAK_FLOPS_PER_GPU``) is used, or
  kernel names that only one architecture runs (gpu_arch.KERNEL_FAMILIES: ``sm90``/``wgmma``
  -> Hopper, ``sm100``/``tcgen05`` -> Blackwell), labelled ``assumed``. Names that newer GPUs
  run too (``sm80``, ``ampere_``: every Hopper trace has them; ``nvjet``: Hopper and Blackwell)
  identify nothing, so the peak stays ``unknown`` and MFU/HFU are reported as unknown rather than guessed
  (an A100 guess for an H100 made MFU 3x too high);
* the user can state the model (``--gpu NAME``, a table name or alias), labelled ``given``;
* a user override (``--peak-tflops``) beats everything and is labelled ``override``.

Every result carries `source` and a human `reason`, so the report can say why.

The table is gpus/table.py, the derivation and the identification from hardware properties
gpus/hardware.py, the architectures' rates gpus/arch.py; this module resolves a GPU's peak in the
order above (`resolve`, `stated_gpu`) and gives the per-rank and per-model rows the commands,
MFU and the rules read.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import duckdb

from ..errors import validate_positive
from ..plain import missing
from ..store.duck import has_relation, sql_string
from ..store.query_layer import statements
from .hardware import derive, identify
from .table import (
    DEFAULT_PRECISION,
    PRECISIONS,
    Peak,
    given_peak,
    lookup,
    model_peak,
    rows,
    validate_gpu,
    validate_precision,
)

if TYPE_CHECKING:
    import pandas as pd

# Architecture knowledge (rates, derates, kernel-name families) lives in gpu_arch; its names are
# re-exported so `gpus.KERNEL_FAMILIES`, `gpus.families_sql`, ... keep working for callers.
from .arch import (  # noqa: F401
    ARCH_GUESS,
    ARCH_RATES,
    ARCHS,
    BLACKWELL_DERATE,
    HOPPER_DERATE_PCIE,
    HOPPER_DERATE_SXM,
    KERNEL_FAMILIES,
    families_sql,
    infer_arch,
)

SQL = statements("gpus/gpus")
ENV_HINT_PATTERN = r"(?i)^PEAK_.*FLOP"


def parse_env_hint(name: str, value: str) -> float | None:
    """FLOP/s from an env hint such as PEAK_FLOPS_PER_GPU=989e12 (or PEAK_TFLOPS=989)."""
    try:
        number = float(str(value).strip().strip('"').strip("'"))
    except ValueError:
        return None
    if not math.isfinite(number) or number <= 0:
        return None
    if "TFLOP" in name.upper() or number < 1e6:  # a bare "989" is TFLOP/s, not 989 FLOP/s
        number *= 1e12
    return number


def with_override(peak: Peak | None, peak_tflops: float, precision: str) -> Peak:
    """The user's peak replaces the chosen precision; the rest of the row is kept for context."""
    base = peak or Peak(source="unknown", reason="")
    tflops = dict(base.tflops)
    tflops[precision] = float(peak_tflops)
    return Peak(
        source="override",
        reason=f"--peak-tflops {peak_tflops:g} for {precision}"
        + (f" (was: {base.reason})" if base.reason else ""),
        model=base.model,
        tflops=tflops,
        mem_bw_gbs=base.mem_bw_gbs,
        sm_count=base.sm_count,
        boost_mhz=base.boost_mhz,
        tensor_mhz=base.tensor_mhz,
        confidence="user",
    )


def _env_peak(env_hints: dict[str, str] | None, precision: str) -> Peak | None:
    """An environment hint such as PEAK_FLOPS_PER_GPU=989e12, taken as the `precision` peak."""
    for key, value in sorted((env_hints or {}).items()):
        flops = parse_env_hint(key, value)
        if flops is not None:
            return Peak(
                source="assumed",
                reason=f"GPU model unknown; environment hint {key}={value} taken as the {precision} peak",
                tflops={precision: flops / 1e12},
                confidence="assumed",
            )
    return None


def _family_peak(arch: str | None, why: str) -> Peak | None:
    """The representative table row of an architecture the kernel names settle, labelled assumed."""
    model = ARCH_GUESS.get(arch or "")
    if model is None:
        return None
    row = model_peak(model)
    return replace(
        row, source="assumed", reason=f"GPU model unknown; {why} -> assumed {model}", confidence="assumed"
    )


def _unknown_peak(name: str | None, why: str, hardware: str = "") -> Peak:
    """No peak: MFU/HFU stay unknown, and the reason says how to supply one (and, when the
    hardware properties were recorded, why they identified no model)."""
    what = f"GPU {name!r} not in the peak table" if name else "no GPU model in the trace"
    seen = f"{hardware}, no clock or env hint" if hardware else "no SM count/clock/CC or env hint"
    return Peak(
        source="unknown",
        reason=f"{what}, {seen}; {why}: peak and MFU/HFU unknown. "
        "Pass --gpu NAME (see `nsight-analyze gpus --list-models`) or --peak-tflops",
    )


def resolve(
    name: str | None = None,
    sm_count: int | None = None,
    clock_hz: float | None = None,
    compute_major: int | None = None,
    compute_minor: int | None = None,
    mem_bw_bps: float | None = None,
    env_hints: dict[str, str] | None = None,
    families: list[str] | None = None,
    peak_tflops: float | None = None,
    precision: str = DEFAULT_PRECISION,
    gpu: str | None = None,
    memory_bytes: int | None = None,
    vendor: str | None = None,
) -> Peak:
    """gpu-peaks.md §3: override, --gpu, table, derivation, identification from the hardware
    properties, env hint, exclusive kernel names, unknown. `vendor` ('amd' | 'nvidia' | None) is
    what the file says it ran on: an AMD GPU is never derived with NVIDIA's per-SM rates (ROCm
    reports gfx90a as CC 9.0, Hopper's)."""
    hardware = ""
    if gpu is not None:
        peak: Peak | None = given_peak(gpu, name)
    else:
        peak = lookup(name)
        if peak is None and vendor != "amd":
            peak = derive(name, sm_count, clock_hz, compute_major, compute_minor, mem_bw_bps)
        if peak is None:
            peak, hardware = identify(sm_count, compute_major, compute_minor, memory_bytes, vendor)
        peak = peak or _env_peak(env_hints, precision)
    why = ""
    if peak is None:
        arch, why = infer_arch(families)
        peak = _family_peak(arch, why)
    if peak_tflops is not None:
        return with_override(peak, peak_tflops, precision)
    return peak or _unknown_peak(name, why, hardware)


_STATED_GPU: ContextVar[str | None] = ContextVar("stated_gpu", default=None)


@contextmanager
def stated_gpu(gpu: str | None) -> Iterator[None]:
    """Apply --gpu to code that resolves peaks without taking it as an argument (diagnose rules)."""
    validate_gpu(gpu)
    token = _STATED_GPU.set(gpu)
    try:
        yield
    finally:
        _STATED_GPU.reset(token)


MODEL_COLUMNS = ["model", "aliases", "arch", "bf16_tflops", "fp16_tflops", "mem_bw_gbs", "confidence"]


def model_rows() -> list[dict[str, Any]]:
    """The names --gpu accepts: each table model with its aliases and dense bf16 and fp16 peaks
    (fp16 too: Volta and Turing, V100 and T4, have no BF16 tensor cores, and bf16 alone left them
    blank). Columns MODEL_COLUMNS; read from `rows()`, so `gpus --list-models` imports no pandas."""
    return [
        {
            "model": r["model"],
            "aliases": None if r["match"] is None else r["match"].replace("|", ", "),
            "arch": r["arch"],
            "bf16_tflops": r["bf16"],
            "fp16_tflops": r["fp16"],
            "mem_bw_gbs": r["mem_bw_gbs"],
            "confidence": r["confidence"],
        }
        for r in rows()
    ]


def ncu_peaks_sql(precision: str) -> str:
    """Per hardware-counter file, the `precision` peaks its roofline ridge points use. The
    precision is a literal, not a bound parameter: binding one imports pandas (duck.sql_string)."""
    validate_precision(precision)  # an unknown one gave no rows, silently
    return SQL.sql("ncu_peaks", precision=sql_string(precision))


#: The vendor a rank's file says it ran on (`f`: its `files` row; queries/gpus/gpus.sql says how):
#: 'amd', 'nvidia' or NULL. Rules and mfu compose it into their SQL.
VENDOR_SQL = SQL["vendor"]


def rank_peak_rows(
    con: duckdb.DuckDBPyConnection,
    peak_tflops: float | None = None,
    precision: str = DEFAULT_PRECISION,
    gpu: str | None = None,
) -> list[dict[str, Any]]:
    """One row per rank (columns PEAK_COLUMNS): the GPU seen, the peak chosen for `precision`,
    its source and why.

    Inputs are the small per-rank tables (`ranks`, `gpus`, `env`) plus one aggregate over
    kernel names for the architecture evidence; the loop below is over ranks, not events.
    `gpu` (--gpu) states the model of every rank; when None, the GPU of an enclosing
    `stated_gpu` block (if any) does. Plain rows: `gpus` and `mfu` print them without pandas.
    """
    validate_positive("--peak-tflops", peak_tflops)
    validate_precision(precision)
    gpu = gpu if gpu is not None else _STATED_GPU.get()
    validate_gpu(gpu)
    ranks = con.execute(SQL.sql("rank_gpus", vendor=VENDOR_SQL)).fetchall()
    env = con.execute(SQL.sql("env_hints", pattern=ENV_HINT_PATTERN)).fetchall()
    names = "kernel_summary" if _has_rows(con, "kernel_summary") else "kernels"  # stored: 20x faster
    fams = con.execute(SQL.sql("kernel_families", families=families_sql(), names=names)).fetchall()
    hints_of: dict[Any, dict[str, str]] = {}
    for file_id, name, value in env:  # the few hint variables per file
        hints_of.setdefault(file_id, {})[str(name)] = str(value)
    families_of = {
        int(rank): [f for (f, _p, _a), seen in zip(KERNEL_FAMILIES, seen_by_family, strict=True) if seen]
        for rank, *seen_by_family in fams
    }
    out = []
    for rank, file_id, name, sm_count, clock_hz, major, minor, mem_bw_bps, mem_bytes, vendor in ranks:
        peak = resolve(
            name=name,
            sm_count=sm_count,
            clock_hz=clock_hz,
            compute_major=major,
            compute_minor=minor,
            mem_bw_bps=mem_bw_bps,
            env_hints=hints_of.get(file_id, {}),
            families=families_of.get(int(rank), []),
            peak_tflops=peak_tflops,
            precision=precision,
            gpu=gpu,
            memory_bytes=mem_bytes,
            vendor=vendor,
        )
        row = peak_row(peak, precision, rank=int(rank), gpu_name=name)
        out.append({c: row[c] for c in PEAK_COLUMNS})
    return out


def rank_peaks(
    con: duckdb.DuckDBPyConnection,
    peak_tflops: float | None = None,
    precision: str = DEFAULT_PRECISION,
    gpu: str | None = None,
) -> pd.DataFrame:
    """`rank_peak_rows` as a DataFrame (columns PEAK_COLUMNS; NaN for an unknown number)."""
    import pandas as pd

    return pd.DataFrame(rank_peak_rows(con, peak_tflops, precision, gpu), columns=PEAK_COLUMNS)


PEAK_COLUMNS = [
    "rank",
    "gpu_name",
    "model",
    "source",
    "reason",
    "precision",
    "peak_tflops",
    "peak_flops",
    "mem_bw_gbs",
    "ridge_flop_per_byte",
    "sm_count",
    "boost_mhz",
    "tensor_mhz",
    "confidence",
] + [f"peak_{p}_tflops" for p in PRECISIONS]


def peak_row(peak: Peak, precision: str, **extra: Any) -> dict[str, Any]:
    """A flat dict of a Peak for DataFrames and JSON; `precision` is that of the peak shown
    (fp16 for bf16 on a GPU without BF16 tensor cores, and the reason says so)."""
    flops = peak.peak_flops(precision)
    used = peak.precision_of(precision)
    reason = peak.reason
    if used != precision:
        gpu = peak.model or "this GPU"
        reason += f"; {gpu} has no {precision.upper()} tensor cores: its dense {used.upper()} peak"
    row: dict[str, Any] = {
        "model": peak.model,
        "source": peak.source,
        "reason": reason,
        "precision": used,
        "peak_tflops": None if flops is None else flops / 1e12,
        "peak_flops": flops,
        "mem_bw_gbs": peak.mem_bw_gbs,
        "ridge_flop_per_byte": peak.ridge(precision),
        "sm_count": peak.sm_count,
        "boost_mhz": peak.boost_mhz,
        "tensor_mhz": peak.tensor_mhz,
        "confidence": peak.confidence,
    }
    for p in PRECISIONS:
        row[f"peak_{p}_tflops"] = peak.tflops.get(p)
    row.update(extra)
    return row


def precision_label(precision: str, used: Iterable[str | None]) -> str:
    """The precision to name in a title over several GPUs' peaks: `precision` when every peak is
    for it (or none is known), fp16 where every GPU answered bf16 with its FP16 peak (T4, V100),
    both names for a mix (`used`: each known peak's `precision`, as peak_row and precision_of give)."""
    order = {p: i for i, p in enumerate(PRECISIONS)}
    shown = sorted({p for p in used if isinstance(p, str)}, key=lambda p: (order.get(p, len(order)), p))
    return "/".join(shown) if shown else precision


def peaks_precision_label(precision: str, peaks: Iterable[dict[str, Any]]) -> str:
    """precision_label over the rank peaks (rank_peak_rows' rows) whose peak is known."""
    return precision_label(precision, [p["precision"] for p in peaks if p["peak_tflops"] is not None])


def plain_value(value: Any) -> Any:
    """pandas NA/NaT/NaN -> None, numpy scalars -> Python."""
    if missing(value):
        return None
    value = value.item() if hasattr(value, "item") else value
    return None if missing(value) else value


def _has_rows(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether `name` exists and holds rows (a stored result is missing or empty in a workspace
    that was never analysed, or whose rows were inserted by hand)."""
    return has_relation(con, name) and con.execute(f'SELECT count(*) > 0 FROM "{name}"').fetchone()[0]
