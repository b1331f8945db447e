"""The verdict (regression / improvement / neutral), its basis, the ranks it names, its reason in
words, and the CI gate (docs/compare.md "Verdict and its basis").
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import UserError


def verdict_of(stats: dict[str, Any], cfg: dict[str, float]) -> tuple[str, float | None, str]:
    """(verdict, confidence, why) for a step-time comparison; see docs/compare.md "Verdict"."""
    if stats["ci_pct"] is None:
        return (
            "neutral",
            None,
            (f"too few step windows for a confidence interval (need {int(cfg['min_samples'])} per run)"),
        )
    lo, hi = stats["ci_pct"]
    p = stats["p_value"]
    d = stats["delta_pct"]
    significant = p is not None and p < cfg["alpha"]
    if significant and lo > 0 and d >= cfg["min_effect_pct"]:
        return "regression", stats["p_increase"], "slower beyond noise"
    if significant and hi < 0 and d <= -cfg["min_effect_pct"]:
        return "improvement", stats["p_decrease"], "faster beyond noise"
    if abs(d) < cfg["min_effect_pct"]:
        why = f"median change {d:+.2f}% is below min_effect_pct {cfg['min_effect_pct']:g}%"
    else:
        why = f"change not significant (p = {p:.3g}, CI {lo:+.2f}%..{hi:+.2f}%)"
    return "neutral", stats["p_within_min_effect"], why


def rate_verdict(wr: dict[str, Any], cfg: dict[str, float]) -> tuple[str, float | None, str]:
    """(verdict, confidence, why) on work per unit of time; see docs/compare.md "Verdict"."""
    if not wr["comparable"]:
        return "neutral", None, f"not comparable: {wr['why']}"
    d = wr["delta_pct"]
    lo, hi = wr["range_pct"]
    eff = cfg["min_effect_pct"]
    if d <= -eff and hi < 0:
        return "regression", None, "less work per unit of time, however the windows are cut"
    if d >= eff and lo > 0:
        return "improvement", None, "more work per unit of time, however the windows are cut"
    if abs(d) < eff:
        return "neutral", None, f"work-rate change {d:+.2f}% is below min_effect_pct {eff:g}%"
    return (
        "neutral",
        None,
        (f"work-rate change {d:+.2f}% is within what cutting the windows changes ({lo:+.2f}%..{hi:+.2f}%)"),
    )


def _basis(has_steps: dict[str, bool], wr: dict[str, Any]) -> tuple[str, str]:
    """(basis, why): step times when both runs have step windows, else work per unit of time."""
    if has_steps["before"] and has_steps["after"]:
        return "step_time", "both runs have step windows"
    which = (
        "neither run has"
        if not (has_steps["before"] or has_steps["after"])
        else ("AFTER has" if has_steps["before"] else "BEFORE has") + " no"
    )
    why = f"{which} step windows, so step times are not comparable"
    if not wr["comparable"]:
        return "none", f"{why}, and work per unit of time is not comparable either: {wr['why']}"
    return "work_rate", f"{why}: judged by kernel work per ns of window"


def _suspects(result: dict[str, Any], cfg: dict[str, float]) -> list[int]:
    """Ranks to name in a verdict: new stragglers, else (step basis) the rank whose compute per step
    changed most, else (work-rate basis) the rank whose work rate changed most."""
    imb_b, imb_a = result["imbalance"]["before"], result["imbalance"]["after"]
    new = [r for r in imb_a["straggler_ranks"] if r not in imb_b["straggler_ranks"]]
    if new:
        return new
    sign = -1 if result["verdict"]["verdict"] == "improvement" else 1
    if result["verdict"]["basis"] == "work_rate":
        rates = [
            (p["delta_pct"], p["rank"]) for p in result["work_rate"]["per_rank"] if p["delta_pct"] is not None
        ]
        if len(rates) < 2:
            return []
        best = min(rates, key=lambda g: sign * g[0])  # a regression is a fall of the rate
        others = [d for d, r in rates if r != best[1]]
        return [best[1]] if abs(best[0] - sum(others) / len(others)) >= cfg["min_effect_pct"] else []
    per = (result["partition"] or {}).get("per_rank") or []
    grown = [
        (p["delta"]["compute_ns"] / p["before"]["compute_ns"], p["rank"])
        for p in per
        if p["before"]["compute_ns"]
    ]
    if not grown:
        return []
    best = max(grown, key=lambda g: sign * g[0])
    return [best[1]] if sign * best[0] * 100 >= cfg["min_effect_pct"] else []


def _reason(result: dict[str, Any]) -> str:
    v = result["verdict"]
    if v["basis"] == "step_time":
        s = result["step_time"]["slowest"]
        if s["delta_pct"] is None:
            return f"{v['verdict']}: no step time on one side"
        text = f"{v['verdict']}: slowest-rank median step time {s['delta_pct']:+.2f}%"
        if s["ci_pct"]:
            text += (
                f" ({100 * result['settings']['confidence_level']:g}% CI {s['ci_pct'][0]:+.2f}%.."
                f"{s['ci_pct'][1]:+.2f}%, p = {s['p_value']:.3g})"
            )
    else:
        wr = result["work_rate"]
        if wr["comparable"]:
            lo, hi = wr["range_pct"]
            text = (
                f"{v['verdict']}: work per unit of time {wr['delta_pct']:+.2f}% "
                f"({lo:+.2f}%..{hi:+.2f}% however the windows are cut; {v['basis_why']})"
            )
        else:
            text = f"{v['verdict']}: {v['basis_why']}"
    if v["verdict"] == "neutral" and v["basis"] != "none":  # with no basis, basis_why said why
        text += f"; {v['why']}"
    if v["ranks"] and v["verdict"] != "neutral":
        imb = result["imbalance"]["after"]
        names = ", ".join(map(str, v["ranks"]))
        if set(v["ranks"]) <= set(imb["straggler_ranks"]):
            text += f"; rank {names} became the straggler ({imb['verdict']})"
        elif v["basis"] == "work_rate":
            text += f"; rank {names} changed most in work per unit of time"
        else:
            text += f"; rank {names} changed most in compute per step"
    return text


def check_gate(threshold_pct: float) -> None:
    """The gate's PCT must be a finite percentage >= 0: `change > nan` is never true, so a NaN
    gate passed every regression."""
    if not (math.isfinite(threshold_pct) and threshold_pct >= 0):
        raise UserError(f"--fail-on-regression {threshold_pct!r}: give a finite percentage >= 0")


def gate(result: dict[str, Any], threshold_pct: float) -> dict[str, Any]:
    """CI gate: fails when the run got worse by more than PCT with confidence, on the verdict's basis.

    step_time: the verdict is `regression` and the whole CI of the slowest rank's median step time
    change lies above PCT. work_rate: the verdict is `regression` and even the smallest loss of
    work per unit of time over the window cuts (-range_pct[1]) is above PCT.
    Why so strict: a CI gate that cries wolf gets switched off; noise-level changes (below
    min_effect_pct, or not significant) never fail it.
    """
    check_gate(threshold_pct)
    basis = result["verdict"].get("basis", "step_time")
    verdict = result["verdict"]["verdict"]
    if basis == "work_rate":
        wr = result["work_rate"]
        least = -wr["range_pct"][1]
        failed = least > threshold_pct and verdict == "regression"
        reason = (
            f"work per unit of time {wr['delta_pct']:+.2f}%, at least {least:+.2f}% lost however the "
            f"windows are cut {'>' if least > threshold_pct else '<='} {threshold_pct:g}%, "
            f"verdict {verdict}"
        )
        return {"threshold_pct": threshold_pct, "failed": bool(failed), "reason": reason}
    if basis == "none":
        return {
            "threshold_pct": threshold_pct,
            "failed": False,
            "reason": f"the runs are not comparable: the gate cannot fail ({result['verdict']['why']})",
        }
    s = result["step_time"]["slowest"]
    cfg = result["settings"]
    if s["ci_pct"] is None:
        return {
            "threshold_pct": threshold_pct,
            "failed": False,
            "reason": "no confidence interval (too few steps): the gate cannot fail",
        }
    lo = s["ci_pct"][0]
    failed = lo > threshold_pct and verdict == "regression"
    reason = (
        f"slowest-rank median step time {s['delta_pct']:+.2f}%, "
        f"{100 * cfg['confidence_level']:g}% CI lower bound {lo:+.2f}% "
        f"{'>' if lo > threshold_pct else '<='} {threshold_pct:g}%, p = {s['p_value']:.3g}, "
        f"verdict {verdict}"
    )
    return {"threshold_pct": threshold_pct, "failed": bool(failed), "reason": reason}
