"""A GPU's peak from its hardware properties, when the trace's name is not in the peak table.

Why its own module: two ways to a peak need no name. `derive` multiplies the SM count, the clock
and the architecture's FLOP/clk/SM (gpus/arch.py), with the tensor-clock derate (gpu-peaks.md §3),
labelled ``derived``; `identify` finds the table rows a GPU's SM/CU count, compute capability and
memory fit (a ROCm trace may name no GPU), labelled ``identified``, and refuses to choose between
rows of different peaks. gpus.resolve tries them after the table and before any guess.
"""

from __future__ import annotations

import math
from dataclasses import replace

from .arch import ARCH_RATES, BLACKWELL_DERATE, HOPPER_DERATE_PCIE, HOPPER_DERATE_SXM
from .table import PRECISIONS, TENSOR_PRECISIONS, Peak, row_peak, rows

#: Reported memory / the vendor's nominal size that still fits a table row: HBM parts report 98.5-100 %
#: of it (an H100 80GB: 79.2 GiB, an MI300X: 192.0 GiB), GDDR parts with ECC on 1/16 less (a T4's 16 GB:
#: 14.8 GiB). Properties that fit several rows then identify nothing (`identify`).
MEMORY_FIT = (0.9, 1.01)
#: Rows whose peaks agree within this (relative) are one answer: an MI210 and an MI250 GCD are the same
#: 104 CUs at 1700 MHz, and the datasheets round the halved MI250 figures differently (22.65 vs 22.6).
SAME_PEAK_REL = 0.01


def vendor_of(arch: str | None) -> str:
    """'amd' for a table row of a CDNA architecture, else 'nvidia'."""
    return "amd" if str(arch or "").startswith("cdna") else "nvidia"


def _same_peaks(a: Peak, b: Peak) -> bool:
    values = [(a.tflops.get(p), b.tflops.get(p)) for p in PRECISIONS] + [(a.mem_bw_gbs, b.mem_bw_gbs)]
    return all(
        (x is None and y is None)
        or (x is not None and y is not None and math.isclose(x, y, rel_tol=SAME_PEAK_REL))
        for x, y in values
    )


def identify(
    sm_count: int | None,
    compute_major: int | None,
    compute_minor: int | None,
    memory_bytes: int | None = None,
    vendor: str | None = None,
) -> tuple[Peak | None, str]:
    """The table model a GPU's hardware properties fit, for a trace that does not name it; else
    (None, why not).

    Why: ROCm's PyTorch profiler can record a GPU with an empty name (TraceLens's vLLM MI300X
    traces: 304 CUs, CC 9.4, 192 GiB), and without a name or a clock the peak was unknown although
    only one GPU has those properties. A row fits when its CC and SM/CU count are the recorded ones,
    its vendor is the trace's (`vendor`: 'amd' for a ROCm trace, 'nvidia' for a CUDA one, None when
    the file does not say; ROCm reports gfx90a as CC 9.0 like Hopper) and, where both are known, the
    recorded memory is MEMORY_FIT of its nominal size. One fitting row, or several whose peaks agree
    (SAME_PEAK_REL), is the answer; rows of different peaks are never chosen between.
    """
    if not sm_count or compute_major is None or compute_minor is None:
        return None, ""
    cc = f"{int(compute_major)}.{int(compute_minor)}"
    gib = float(memory_bytes) / 2**30 if memory_bytes else None
    fits = []
    for idx, row in enumerate(rows()):
        if row["cc"] != cc or row["sm_count"] is None or int(row["sm_count"]) != int(sm_count):
            continue
        if vendor is not None and vendor_of(row["arch"]) != vendor:
            continue
        nominal = row["memory_gb"]
        if gib is not None and nominal is not None and not (MEMORY_FIT[0] <= gib / nominal <= MEMORY_FIT[1]):
            continue
        fits.append(idx)
    amd = vendor == "amd" or (bool(fits) and all(vendor_of(rows()[i]["arch"]) == "amd" for i in fits))
    seen = f"{int(sm_count)} {'CUs' if amd else 'SMs'}, CC {cc}" + ("" if gib is None else f", {gib:.0f} GiB")
    if not fits:
        return None, f"no peak-table model has {seen}"
    peaks = [row_peak(i, "identified", "") for i in fits]
    models = [str(p.model) for p in peaks]
    if not all(_same_peaks(peaks[0], p) for p in peaks[1:]):
        return None, f"{seen} fit {' and '.join(models)}, whose peaks differ: no guess"
    reason = f"no GPU name in the trace; identified from {seen} -> {' / '.join(models)}"
    if len(models) > 1:
        reason += " (the same hardware and peaks)"
    return replace(peaks[0], model=" / ".join(models), reason=reason), ""


def _is_geforce(name: str) -> bool:
    """GeForce fuse (half-rate FP32 accumulate), per gpu-peaks.md §3 step 3."""
    low = name.lower()
    if "geforce" in low:
        return True
    return "rtx" in low and "ada generation" not in low and "pro" not in low and "quadro" not in low


def derive(
    name: str | None,
    sm_count: int | None,
    clock_hz: float | None,
    compute_major: int | None,
    compute_minor: int | None,
    mem_bw_bps: float | None = None,
) -> Peak | None:
    """SM count x clock x FLOP/clk/SM of the architecture, tensor-clock derated; None if impossible."""
    if not sm_count or not clock_hz or compute_major is None or compute_minor is None:
        return None
    rates = ARCH_RATES.get((int(compute_major), int(compute_minor)))
    if rates is None:
        return None
    name = name or ""
    ghz = float(clock_hz) / 1e9
    notes = [
        f"{sm_count} SMs x {ghz:.3f} GHz x FLOP/clk/SM of {rates['arch']} "
        f"(CC {compute_major}.{compute_minor})"
    ]
    halve: tuple[str, ...] = ()
    if "half" in rates:
        geforce = "geforce" in name.lower() if rates.get("half_rule") == "geforce" else _is_geforce(name)
        if geforce:
            halve = rates["half"]
            notes.append("GeForce: half-rate FP32-accumulate tensor math (uncertain)")
    derate = 1.0
    if compute_major == 9:
        derate = HOPPER_DERATE_PCIE if "pcie" in name.lower() else HOPPER_DERATE_SXM
        notes.append(f"tensor-clock derate {derate:.3f}")
    elif compute_major == 10:
        derate = BLACKWELL_DERATE
        notes.append(f"tensor-clock derate {derate:.3f}")
    tflops: dict[str, float | None] = {}
    for p in PRECISIONS:
        per_sm = rates.get(p)
        if per_sm is None:
            tflops[p] = None
            continue
        value = sm_count * ghz * per_sm / 1000.0
        if p in halve:
            value /= 2
        if p in TENSOR_PRECISIONS:
            value *= derate
        tflops[p] = value
    return Peak(
        source="derived",
        reason="; ".join(notes),
        model=name or None,
        tflops=tflops,
        mem_bw_gbs=None if not mem_bw_bps else float(mem_bw_bps) / 1e9,
        sm_count=int(sm_count),
        boost_mhz=ghz * 1000,
        tensor_mhz=ghz * 1000 * derate if derate != 1.0 else None,
        confidence="D",
    )
