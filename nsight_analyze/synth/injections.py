"""Parsing of `--inject` specifications into one validated, combinable set of anomalies."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import UserError

SPEC_HELP = (
    "straggler=RANK:+PCT, clock-skew=NODE:+MS|-MS, input-stall=EVERY:MS, exposed-comm, "
    "launch-bound=FIRST-LAST, sync-stall, cuda-graph, slow-gpu=RANK:+PCT, uneven-work=RANK:+PCT, "
    "slow-host=RANK:+PCT, slow-link=NODE:+PCT, unfused-elementwise=FIRST-LAST, fp32-gemm=PCT, "
    "unfused-attention, memory-usage"
)
# rank (node for slow-link) -> percent: one rank's (node's) cause of slowness (synth/causes.py)
CAUSE_KEYS = {"slow-gpu": "RANK", "uneven-work": "RANK", "slow-host": "RANK", "slow-link": "NODE"}


@dataclass
class Injections:
    """All anomalies of one generated job (empty = a healthy job)."""

    straggler: dict[int, float] = field(default_factory=dict)  # rank -> % slower compute
    clock_skew_ms: dict[int, float] = field(default_factory=dict)  # node -> ms added to its UTC clock
    input_stall: tuple[int, float] | None = None  # (every N-th step, ms)
    exposed_comm: bool = False
    launch_bound: tuple[int, int] | None = None  # inclusive step-number range
    sync_stall: bool = False
    cuda_graph: bool = False
    memory_usage: bool = False  # write CUDA_GPU_MEMORY_USAGE_EVENTS rows (synth/memory.py)
    specs: list[str] = field(default_factory=list)
    unfused_elementwise: tuple[int, int] | None = None  # steps with eager GELU chains (kernel_faults.py)
    fp32_gemm_pct: float = 0.0  # % of layer GEMM launches in FP32
    unfused_attention: bool = False  # bmm -> softmax -> bmm instead of FlashAttention
    slow_gpu: dict[int, float] = field(default_factory=dict)  # rank -> % longer, every kernel
    uneven_work: dict[int, float] = field(default_factory=dict)  # rank -> % more kernels
    slow_host: dict[int, float] = field(default_factory=dict)  # rank -> host delay, % of step GPU time
    slow_link: dict[int, float] = field(default_factory=dict)  # node -> % longer transfers
    uneven_shape_pct: float = 0.0  # extra-kernel slots kept without uneven work (re-simulation)
    input_wait_free: bool = False  # the data loader takes no time (no-input-stalls re-simulation)
    comms_free: bool = False  # collectives end at their last arrival (comms-hidden re-simulation)
    launch_free: bool = False  # kernel launches cost the host nothing (no-launch-gaps re-simulation)
    sync_free: bool = False  # a sync returns the moment the GPU drains (no-sync-stalls re-simulation)

    def input_stall_ns(self, step: int) -> int:
        if self.input_stall and step % self.input_stall[0] == 0:
            return int(round(self.input_stall[1] * 1e6))
        return 0

    def is_unfused_elementwise(self, step: int) -> bool:
        u = self.unfused_elementwise
        return bool(u) and u[0] <= step <= u[1]

    def is_launch_bound(self, step: int) -> bool:
        return bool(self.launch_bound) and self.launch_bound[0] <= step <= self.launch_bound[1]


def _num(text: str, spec: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise UserError(f"bad --inject {spec!r}: {text!r} is not a number (forms: {SPEC_HELP})") from None


def _parse_kernel_fault(inj, key: str, val: str, spec: str) -> None:
    """Set the Injections field of one kernel-level spec (kernel_faults.py; UserError on a bad value)."""
    val = val.strip()
    if key == "unfused-elementwise":
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", val)
        if not m or (m.group(2) and int(m.group(2)) < int(m.group(1))):
            raise UserError(
                f"bad --inject {spec!r}: use unfused-elementwise=FIRST-LAST (step numbers), e.g. 3-5"
            )
        inj.unfused_elementwise = (int(m.group(1)), int(m.group(2) or m.group(1)))
    elif key == "fp32-gemm":
        m = re.fullmatch(r"([0-9.]+)%?", val)
        pct = float(m.group(1)) if m and m.group(1).count(".") <= 1 else -1.0
        if not 0 < pct <= 100:
            raise UserError(
                f"bad --inject {spec!r}: use fp32-gemm=PCT with 0 < PCT <= 100, e.g. fp32-gemm=25"
            )
        inj.fp32_gemm_pct = pct
    else:
        if val:
            raise UserError(f"bad --inject {spec!r}: {key} takes no value")
        inj.unfused_attention = True


def parse(specs: list[str] | tuple[str, ...] | str | None) -> Injections:
    """Turn `['straggler=3:+20', 'input-stall=4:30']` (or 'a,b' strings) into Injections."""
    if specs is None:
        specs = []
    if isinstance(specs, str):
        specs = [specs]
    specs = [part.strip() for spec in specs for part in spec.split(",") if part.strip()]
    inj = Injections(specs=list(specs))
    for spec in specs:
        key, _, val = spec.strip().partition("=")
        key = key.strip().lower()
        if key == "straggler":
            m = re.fullmatch(r"(\d+):\+?([0-9.]+)%?", val.strip())
            if not m:
                raise UserError(f"bad --inject {spec!r}: use straggler=RANK:+PCT, e.g. straggler=3:+20")
            inj.straggler[int(m.group(1))] = _num(m.group(2), spec)
        elif key in CAUSE_KEYS:
            what = CAUSE_KEYS[key]
            m = re.fullmatch(r"(\d+):\+?([0-9.]+)%?", val.strip())
            if not m:
                raise UserError(f"bad --inject {spec!r}: use {key}={what}:+PCT, e.g. {key}=1:+20")
            getattr(inj, key.replace("-", "_"))[int(m.group(1))] = _num(m.group(2), spec)
        elif key == "clock-skew":
            m = re.fullmatch(r"(\d+):([+-]?[0-9.]+)(ms)?", val.strip())
            if not m:
                raise UserError(f"bad --inject {spec!r}: use clock-skew=NODE:+MS, e.g. clock-skew=1:+3.5")
            inj.clock_skew_ms[int(m.group(1))] = _num(m.group(2), spec)
        elif key == "input-stall":
            m = re.fullmatch(r"(\d+):([0-9.]+)(ms)?", val.strip())
            if not m or int(m.group(1)) < 1:
                raise UserError(f"bad --inject {spec!r}: use input-stall=EVERY:MS, e.g. input-stall=4:30")
            inj.input_stall = (int(m.group(1)), _num(m.group(2), spec))
        elif key == "launch-bound":
            m = re.fullmatch(r"(\d+)(?:-(\d+))?", val.strip())
            if not m:
                raise UserError(
                    f"bad --inject {spec!r}: use launch-bound=FIRST-LAST (step numbers), e.g. 3-5"
                )
            first = int(m.group(1))
            last = int(m.group(2)) if m.group(2) else first
            if last < first:
                raise UserError(f"bad --inject {spec!r}: empty step range")
            inj.launch_bound = (first, last)
        elif key in ("exposed-comm", "sync-stall", "cuda-graph", "memory-usage"):
            if val:
                raise UserError(f"bad --inject {spec!r}: {key} takes no value")
            setattr(inj, key.replace("-", "_"), True)
        elif key in ("unfused-elementwise", "fp32-gemm", "unfused-attention"):
            _parse_kernel_fault(inj, key, val, spec)
        else:
            raise UserError(f"unknown --inject {spec!r} (known: {SPEC_HELP})")
    return inj
