"""What each GPU architecture does per clock, and which kernel names identify one.

Why a module of its own: `gpus` resolves a GPU's peak (table, derivation, hint, override) and
this is the architecture knowledge it and others rely on: FLOP/clk/SM and the tensor-clock
derates that a derivation multiplies (../shared/docs/gpu-peaks.md §3), and the kernel-name
families that narrow down which architecture ran a trace (the sources' Nsight Compute reader
and the GEMM-precision rule use them too). Pure data and string building: no imports of the
package, so every layer may use it. `gpus` re-exports these names.
"""

from __future__ import annotations

from typing import Any

# Dense FLOP/clk/SM per architecture (gpu-peaks.md §3; FMA = 2). `half` lists the
# precisions whose FP32-accumulate rate is halved on GeForce fuses (§1.3).
# Keys: (compute major, minor). Volta and Turing have FP16 but no BF16 (nor TF32) tensor cores, so
# they list no "bf16": a bf16 peak asked of them is their fp16 one, labelled fp16
# (gpus/table.py: Peak.precision_of).
ARCH_RATES: dict[tuple[int, int], dict[str, Any]] = {
    (7, 0): {"arch": "volta", "fp64": 64, "fp32": 128, "fp16": 1024},
    (7, 5): {
        "arch": "turing",
        "fp64": 4,
        "fp32": 128,
        "fp16": 1024,
        "int8": 2048,
        "half": ("fp16",),
        "half_rule": "geforce",
    },
    (8, 0): {
        "arch": "ampere GA100",
        "fp64": 64,
        "fp64_tc": 128,
        "fp32": 128,
        "tf32": 1024,
        "bf16": 2048,
        "fp16": 2048,
        "int8": 4096,
    },
    (8, 6): {
        "arch": "ampere GA10x",
        "fp64": 4,
        "fp32": 256,
        "tf32": 512,
        "bf16": 1024,
        "fp16": 1024,
        "int8": 2048,
        "half": ("tf32", "bf16", "fp16"),
    },
    (8, 9): {
        "arch": "ada",
        "fp64": 4,
        "fp32": 256,
        "tf32": 512,
        "bf16": 1024,
        "fp16": 1024,
        "fp8": 2048,
        "int8": 2048,
        "half": ("tf32", "bf16", "fp16", "fp8"),
    },
    (9, 0): {
        "arch": "hopper",
        "fp64": 128,
        "fp64_tc": 256,
        "fp32": 256,
        "tf32": 2048,
        "bf16": 4096,
        "fp16": 4096,
        "fp8": 8192,
        "int8": 8192,
    },
    (10, 0): {
        "arch": "blackwell",
        "fp64": 128,
        "fp64_tc": 128,
        "fp32": 256,
        "tf32": 4096,
        "bf16": 8192,
        "fp16": 8192,
        "fp8": 16384,
        "int8": 16384,
    },
    (12, 0): {
        "arch": "blackwell consumer",
        "fp64": 4,
        "fp32": 256,
        "bf16": 1024,
        "fp16": 1024,
        "half": ("bf16", "fp16"),
    },
}

# Tensor-clock derate: NVIDIA's Hopper/Blackwell tensor specs use a lower clock than the
# max boost clock that NVML/nsys report (gpu-peaks.md §1.2, §3 steps 4-5).
HOPPER_DERATE_SXM = 1830 / 1980
HOPPER_DERATE_PCIE = 1620 / 1755
BLACKWELL_DERATE = 1856 / 1965

#: Architectures, oldest first (kernel-name evidence below is stated over these).
ARCHS = ("volta", "turing", "ampere", "ada", "hopper", "blackwell")


def _and_newer(arch: str) -> tuple[str, ...]:
    """`arch` and every later one: libraries keep running older-named kernels on newer GPUs."""
    return ARCHS[ARCHS.index(arch) :]


# Kernel-name evidence: (family, pattern, architectures a kernel of that family runs on).
# Only a family that fits one architecture identifies it. Newer GPUs run older-named kernels
# (the nsys-ai H100 capture has only sm80_xmma GEMMs; TraceLens's H100 traces hold cutlass_80
# kernels) and cuBLASLt's nvjet kernels run on Hopper (fuser H200 traces) and Blackwell
# (TraceLens B200 trace) alike, so those narrow the choice without settling it.
KERNEL_FAMILIES: list[tuple[str, str, tuple[str, ...]]] = [
    ("blackwell", r"(?i)(sm100|sm_100|_100a_|tcgen05|utcmma)", ("blackwell",)),
    ("hopper", r"(?i)(sm90|sm_90|_90a_|wgmma|hopper)", ("hopper",)),
    ("nvjet", r"(?i)nvjet", ("hopper", "blackwell")),
    ("ampere", r"(?i)(ampere_|sm80_|cutlass_80|sm_80|_sm80)", _and_newer("ampere")),
    ("turing", r"(?i)(turing_|sm75_|cutlass_75)", _and_newer("turing")),
    ("volta", r"(?i)(volta_|sm70_|cutlass_70)", _and_newer("volta")),
]

#: The table row assumed when the kernel names leave exactly this architecture.
ARCH_GUESS = {"hopper": "NVIDIA H100 SXM", "blackwell": "NVIDIA B200"}


def infer_arch(families: list[str] | None) -> tuple[str | None, str]:
    """The one architecture every matched kernel-name family runs on (or None), and why.

    Each family narrows the candidates; a guess is made only when one architecture is left,
    because a family that newer GPUs also run (sm80 on an H100) says nothing about the model.
    """
    seen = [(f, archs) for f, _pattern, archs in KERNEL_FAMILIES if f in (families or [])]
    if not seen:
        return None, "no architecture-specific kernel names"
    fits = set(ARCHS)
    for _family, archs in seen:
        fits &= set(archs)
    names = "/".join(f for f, _archs in seen) + " kernel names"
    if len(fits) == 1:
        arch = fits.pop()
        return arch, f"{names} run only on {arch} GPUs"
    if not fits:
        return None, f"{names} contradict each other (no architecture runs them all)"
    return None, f"{names} run on {', '.join(a for a in ARCHS if a in fits)} GPUs alike"


def families_sql(name_column: str = "name") -> str:
    """SQL expressions `bool_or(regexp_matches(name, ...)) AS fam_<family>` for a GROUP BY."""
    parts = []
    for family, pattern, _archs in KERNEL_FAMILIES:
        parts.append(f"bool_or(regexp_matches({name_column}, '{pattern}')) AS fam_{family}")
    return ", ".join(parts)


# What each architecture's matrix units (NVIDIA tensor cores, AMD matrix cores) take, the one place
# a fix checks before advising a precision (rules/precision.gpu_support): bf16 and TF32 need compute
# capability 8.0 (Ampere), FP8 8.9 (Ada, Hopper, Blackwell); Volta has FP16 only, Turing FP16 and
# INT8. AMD: CDNA2 (MI200) bf16/fp16/int8, CDNA3 (MI300) adds XF32 (TF32) and FP8, CDNA4 (MI350)
# drops XF32. Keys are the peak table's `arch` values (data/gpus.csv) and ARCH_RATES' arch names.
ARCH_PRECISIONS: dict[str, frozenset[str]] = {
    "volta": frozenset({"fp16"}),
    "turing": frozenset({"fp16", "int8"}),
    "ampere": frozenset({"tf32", "bf16", "fp16", "int8"}),
    "ada": frozenset({"tf32", "bf16", "fp16", "fp8", "int8"}),
    "hopper": frozenset({"tf32", "bf16", "fp16", "fp8", "int8"}),
    "blackwell": frozenset({"tf32", "bf16", "fp16", "fp8", "int8"}),
    "blackwell-consumer": frozenset({"tf32", "bf16", "fp16", "fp8", "int8"}),
    "cdna2": frozenset({"bf16", "fp16", "int8"}),
    "cdna3": frozenset({"tf32", "bf16", "fp16", "fp8", "int8"}),
    "cdna4": frozenset({"bf16", "fp16", "fp8", "int8"}),
}
#: The lowest NVIDIA compute capability whose tensor cores take each precision.
MIN_CC: dict[str, tuple[int, int]] = {
    "fp16": (7, 0),
    "int8": (7, 2),
    "tf32": (8, 0),
    "bf16": (8, 0),
    "fp8": (8, 9),
}
#: How a fix names what a precision needs, when the GPU is unknown.
NEEDS: dict[str, str] = {
    "tf32": "TF32 needs an Ampere-or-newer GPU (compute capability >= 8.0) or an MI300",
    "bf16": "bf16 needs an Ampere-or-newer GPU (compute capability >= 8.0) or an MI200/MI300",
    "fp8": "FP8 needs an Ada/Hopper-or-newer GPU (compute capability >= 8.9) or an MI300",
    "fp16": "fp16 tensor cores need Volta or newer (compute capability >= 7.0)",
    "int8": "int8 tensor cores need Turing or newer",
}


def arch_key(arch: str | None) -> str | None:
    """The ARCH_PRECISIONS key of an architecture name ('ampere GA100' -> 'ampere',
    'blackwell consumer' -> 'blackwell-consumer'); None when unknown."""
    if not arch:
        return None
    low = str(arch).lower().strip()
    if low.startswith("blackwell") and "consumer" in low:
        return "blackwell-consumer"
    key = low.split()[0]
    return key if key in ARCH_PRECISIONS else None


def supports(precision: str, arch: str | None = None, cc: tuple[int, int] | None = None) -> bool | None:
    """Whether a GPU's matrix units take `precision` (tf32, bf16, fp16, fp8, int8): from its
    architecture when known, else from an NVIDIA compute capability; None when neither is known."""
    key = arch_key(arch)
    if key is not None:
        return precision in ARCH_PRECISIONS[key]
    if cc is not None and precision in MIN_CC:
        return tuple(cc) >= MIN_CC[precision]
    return None
