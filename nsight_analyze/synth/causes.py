"""Causes of one slow rank (or node) for the simulator, and their ground truth (issue 19).

`slow-gpu=RANK:+PCT`: every kernel of the rank (not NCCL, not copies) takes PCT % longer, same count.
`uneven-work=RANK:+PCT`: the rank runs PCT % more forward-layer kernels (the same kinds) per step.
    Every rank's program holds the extra slots (so the random draws do not depend on who gets
    them); a rank without the extra work skips them: zero duration, no launch, not written.
`slow-host=RANK:+PCT`: the rank's host issues the step's first forward launch later by PCT % of
    the step's base GPU time: the GPU idles host-bound, the rank arrives late at the collectives.
`slow-link=NODE:+PCT`: the NCCL transfers end PCT % of the transfer later on that node's ranks.

Their truth (injection_truth.cause_truth) re-simulates the job without these causes (and the
straggler), with the same random draws, for `whatif` rows; `attribution` names each injected rank
and its cause.
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError

CAUSE_OF = {
    "slow_gpu": "slow-gpu",
    "uneven_work": "more-work",
    "slow_host": "slow-host",
    "slow_link": "slow-link",
}


def spec_name(key: str) -> str:
    return key.replace("_", "-")  # the --inject spelling


def extra_kinds(inj, layer_kinds: list, layers: int) -> list:
    """Kernel kinds of the uneven-work slots: PCT % of the forward layers' kernels, cycled."""
    pct = max([*inj.uneven_work.values(), inj.uneven_shape_pct, 0.0])
    n = int(round(pct / 100.0 * (27 * layers + 20)))  # PCT % of the step's kernels (layers_for)
    return [layer_kinds[i % len(layer_kinds)] for i in range(n)]


class RankCauses:
    """Per-rank factors of one job's causes, applied to each program the simulator runs."""

    def __init__(self, cfg) -> None:
        inj, R = cfg.injections, cfg.ranks
        self.gpu = np.ones(R)
        for r, pct in inj.slow_gpu.items():
            if r < R:
                self.gpu[r] = 1 + pct / 100.0
        self.link_extra = np.zeros(R)
        for r in range(R):
            self.link_extra[r] = inj.slow_link.get(cfg.node_of(r), 0.0) / 100.0
        self.uneven = np.array([inj.uneven_work.get(r, 0.0) for r in range(R)])
        self.uneven_max = max([*inj.uneven_work.values(), inj.uneven_shape_pct, 0.0])
        self.host = np.array([inj.slow_host.get(r, 0.0) / 100.0 for r in range(R)])
        self.input_free = inj.input_wait_free
        self.comms_free = inj.comms_free

    def gpu_factor(self, p) -> np.ndarray:
        """(R, n) duration factor: slow-gpu on every kernel but NCCL ones and copies."""
        if np.all(self.gpu == 1.0):
            return np.ones((1, p.n))
        kern = ~p.is_nccl & (p.ktype >= 0) & (p.kind != 3)  # 3 = SYNC (the blocking copy)
        kern &= np.array([x.api != 1 for x in p.items])  # not cudaMemcpyAsync
        return np.where(kern[None, :], self.gpu[:, None], 1.0)

    def apply(self, p, step, dur, api_dur, pre_gap, lat) -> np.ndarray:
        """Skip absent uneven-work slots and delay the slow host (in place); returns (R, n) present."""
        R = len(self.gpu)
        present = np.ones((R, p.n), bool)
        if self.input_free and p.dataloader_item >= 0:
            api_dur[:, p.dataloader_item] = 0
        slots = np.flatnonzero(p.extra)
        if len(slots):
            want = np.rint(len(slots) * self.uneven / self.uneven_max).astype(int) if self.uneven_max else 0
            present[:, slots] = np.arange(len(slots))[None, :] < np.asarray(want).reshape(-1, 1)
            absent = ~present
            dur[absent] = 0
            api_dur[absent] = 0
            pre_gap[absent] = 0
            lat[absent] = 0
        if step is not None and np.any(self.host > 0):
            first = p.dataloader_item + 2 if p.dataloader_item >= 0 else 0
            base = float(p.dur[(p.stream == 0) & p.has_gpu & ~p.extra].sum())
            pre_gap[:, first] += np.rint(self.host * base).astype(np.int64)
        return present

    def transfer(self, xfer: int, jitter: np.ndarray) -> np.ndarray:
        """(R,) transfer (plus end jitter) as each rank sees it: slow-link ranks end later."""
        if self.comms_free:
            return np.zeros_like(jitter)
        return xfer + np.rint(xfer * self.link_extra).astype(np.int64) + jitter


def validate(inj, ranks: int, nodes: int, workload: str = "transformer") -> None:
    if inj.uneven_work and workload != "transformer":
        raise UserError("uneven-work repeats transformer layers: use it with --workload transformer")
    for key in ("slow_gpu", "uneven_work", "slow_host"):
        for r in getattr(inj, key):
            if r >= ranks:
                raise UserError(f"{spec_name(key)} rank {r} does not exist (ranks 0..{ranks - 1})")
    for n in inj.slow_link:
        if n >= nodes:
            raise UserError(f"slow-link node {n} does not exist (nodes 0..{nodes - 1})")
