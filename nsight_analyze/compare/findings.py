"""Findings of both runs matched by the cause they measure (CAUSES), not by their id, with each
cause's magnitude before and after and a change status (docs/compare.md "Findings").
"""

from __future__ import annotations

import math
from typing import Any

import duckdb

from ..rules import CAUSES
from ..rules.declare import Cause
from ..store.query_layer import statements

SQL = statements("compare/findings")

# The causes are declared by the findings themselves (rules/declare.py `causes=`): diagnose's rules
# own the findings and which of them measure the same thing, compare owns how to compare them.
CAUSE_OF = {i: c for c in CAUSES for i in c.ids}
CHANGES = ("worse", "new", "improved", "resolved", "unchanged", "unmeasured")


def cause_of(finding_id: str) -> Cause:
    """The cause a finding id measures; an id compare does not know is its own cause."""
    return CAUSE_OF.get(finding_id) or Cause(finding_id, (finding_id,), finding_id, "ns_per_step")


def _measures(con: duckdb.DuckDBPyConnection, side: str, cat: str) -> dict[str, float | None]:
    """Each side's own value of every cause with a `measure`, whether or not diagnose reported it.

    Same definitions as the rules (all ranks, diagnose's windows: the steps, else the capture):
    idle causes = sum over steps of the worst rank's value / steps (diag_step_causes); memory
    share = 100 x memory / busy time (rules/memory_bound.py); dominant share = the largest kernel
    name's share of kernel_summary time.
    """
    w = SQL.sql("diagnose_windows", tp=f"{side}_tp")
    out: dict[str, float | None] = {}
    for c in CAUSES:  # the idle causes with a measure: one aggregate each
        if c.measure and c.unit == "ns_per_step":
            v = con.execute(SQL.sql("cause_per_step", measure=c.measure, windows=w)).fetchone()[0]
            out[c.key] = None if v is None else float(round(v))
    mem = con.execute(SQL.sql("memory_share", windows=w)).fetchone()[0]
    out["memory-bound"] = None if mem is None else float(mem)
    try:
        dom = con.execute(SQL.sql("dominant_share", kernel_summary=f"{cat}.kernel_summary")).fetchone()[0]
        out["dominant-kernel"] = None if dom is None else float(dom)
    except duckdb.Error:
        out["dominant-kernel"] = None
    return out


def _threshold(cause: Cause, diag: dict[str, Any] | None) -> float | None:
    """The rule's reporting threshold in the cause's unit for one run (None when unknown)."""
    if cause.threshold is None or not diag:
        return None
    th = diag["thresholds"].get(cause.threshold)
    if th is None:
        return None
    if cause.key == "clock-skew":
        return float(th) * 1000.0
    if cause.of_step:
        step = diag.get("mean_step_ns")
        return float(th) / 100.0 * float(step) if step else None
    return float(th)


def _magnitude(
    cause: Cause, finding: dict[str, Any] | None, measured: dict[str, float | None]
) -> float | None:
    if cause.measure and cause.key in measured and measured[cause.key] is not None:
        return measured[cause.key]
    if finding is None:
        return None
    v = (
        finding["recoverable_ns_per_step"]
        if cause.magnitude == "recoverable"
        else finding.get("metrics", {}).get(cause.magnitude)
    )
    try:
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
    except (TypeError, ValueError):
        return None


def _below(m: float, t: float) -> bool:
    return m < t or m <= 0


def _change(
    cause: Cause,
    mb: float | None,
    ma: float | None,
    tb: float | None,
    ta: float | None,
    present_b: bool,
    present_a: bool,
    cfg: dict[str, float],
) -> tuple[str, str]:
    """(status, why) of one cause; docs/compare.md "Findings"."""
    band, ratio = cfg["finding_change_pct"] / 100.0, cfg["resolved_max_ratio"]
    higher_better = cause.unit == "fraction"

    def by_size(b: float, a: float) -> tuple[str, str]:
        if b == a or (b and abs(a - b) <= band * abs(b)):
            return "unchanged", f"magnitude within {cfg['finding_change_pct']:g} % of before"
        grew = a > b
        status = "worse" if grew != higher_better else "improved"
        return status, "magnitude grew" if grew else "magnitude fell"

    if mb is not None and ma is not None:
        if present_b and not present_a and ta is not None and _below(ma, ta) and ma <= ratio * mb:
            return "resolved", f"below the rule's threshold and at most {ratio:g} x before"
        if present_a and not present_b and tb is not None and _below(mb, tb) and mb <= ratio * ma:
            return "new", f"below the rule's threshold before and at most {ratio:g} x after"
        st, why = by_size(mb, ma)
        if present_b != present_a:
            why += (
                " (the finding " + ("is no longer" if present_b else "is now") + " reported: a "
                "threshold crossing, not a change of cause)"
            )
        return st, why
    if present_b and not present_a and mb is not None and ta is not None:
        if ta <= ratio * mb:  # absent: below ta, so at most ratio x before
            return "resolved", f"not reported after, so below its threshold ({ta:.4g}) <= {ratio:g} x before"
        if ta < (1 - band) * mb:
            return "improved", f"not reported after, so below its threshold ({ta:.4g})"
    if present_a and not present_b and ma is not None and tb is not None:
        if tb <= ratio * ma:
            return "new", f"not reported before, so below its threshold ({tb:.4g}) <= {ratio:g} x after"
        if tb < (1 - band) * ma:
            return "worse", f"not reported before, so below its threshold ({tb:.4g})"
    return "unmeasured", "no magnitude to compare on " + (
        "both runs" if present_b == present_a else "the run without the finding"
    )


def _findings_diff(
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    measured: dict[str, dict[str, float | None]],
    cfg: dict[str, float],
) -> dict[str, Any]:
    """Findings matched by cause (CAUSES), with magnitudes before/after and a change status."""
    if before is None or after is None:
        return {"available": False, "resolved": [], "new": [], "persisting": [], "causes": []}
    sides = {"before": before, "after": after}
    by_cause: dict[str, dict[str, list[dict]]] = {}
    for side, diag in sides.items():
        for f in diag["findings"]:
            by_cause.setdefault(cause_of(f["id"]).key, {"before": [], "after": []})[side].append(f)
    public = ("id", "title", "severity", "kind", "ranks", "recoverable_ns_per_step", "recoverable_pct")
    causes, resolved, new, persisting = [], [], [], []
    for key, fs in by_cause.items():
        cause = cause_of((fs["before"] or fs["after"])[0]["id"])
        fb, fa = (fs["before"] or [None])[0], (fs["after"] or [None])[0]
        mb, ma = _magnitude(cause, fb, measured["before"]), _magnitude(cause, fa, measured["after"])
        tb, ta = _threshold(cause, before), _threshold(cause, after)
        status, why = _change(cause, mb, ma, tb, ta, fb is not None, fa is not None, cfg)
        delta = None if mb is None or ma is None else ma - mb
        entry = {
            "cause": key,
            "title": cause.title,
            "status": status,
            "why": why,
            "ids_before": [f["id"] for f in fs["before"]],
            "ids_after": [f["id"] for f in fs["after"]],
            "unit": cause.unit,
            "magnitude_before": mb,
            "magnitude_after": ma,
            "delta": delta,
            "delta_pct": 100.0 * delta / mb if delta is not None and mb else None,
            "threshold_before": tb,
            "threshold_after": ta,
            "severity_before": fb["severity"] if fb else None,
            "severity_after": fa["severity"] if fa else None,
        }
        causes.append(entry)
        if status == "resolved":
            resolved += [{k: f[k] for k in public} | {"cause": key} for f in fs["before"]]
        elif status == "new":
            new += [{k: f[k] for k in public} | {"cause": key} for f in fs["after"]]
        else:
            ref = fa or fb
            persisting.append(
                {
                    "id": ref["id"],
                    "title": ref["title"],
                    "cause": key,
                    "status": status,
                    "ids_before": entry["ids_before"],
                    "ids_after": entry["ids_after"],
                    "severity_before": entry["severity_before"],
                    "severity_after": entry["severity_after"],
                    "recoverable_ns_per_step_before": fb["recoverable_ns_per_step"] if fb else None,
                    "recoverable_ns_per_step_after": fa["recoverable_ns_per_step"] if fa else None,
                    "magnitude_before": mb,
                    "magnitude_after": ma,
                }
            )
    order = {s: i for i, s in enumerate(CHANGES)}
    causes.sort(key=lambda c: (order[c["status"]], -abs(c["delta_pct"] or 0.0), c["cause"]))
    return {"available": True, "resolved": resolved, "new": new, "persisting": persisting, "causes": causes}
