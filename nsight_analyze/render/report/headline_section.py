"""The report section "Headline": the job-level numbers and the top findings.

Why its own module: the headline is the page's summary, built from several results at once (the
per-rank partition, the rank × step windows, the imbalance verdict, MFU/HFU and diagnose's findings),
and its ratios (`headline_numbers`) are checked on their own by tests; the other sections each
render one result (sections.py). Its data is the report document's, like every other section's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from .html import esc, fmt, kpi, missing, notes, plain, section, table

if TYPE_CHECKING:
    from ...report_doc.document import Part, ReportDocument


def headline_numbers(part: pd.DataFrame, rank_step: pd.DataFrame | None) -> dict[str, Any]:
    """Job-level ratios of the per-rank partition (sums over ranks), and step-time statistics."""
    win = float(part["window_ns"].sum())
    out: dict[str, Any] = {"ranks": len(part)}
    if win > 0:
        out["gpu_busy_pct"] = 100.0 * (win - float(part["idle_ns"].sum())) / win
        out["comms_exposed_pct"] = 100.0 * float(part["comms_exposed_ns"].sum()) / win
    total = float(part["comms_total_ns"].sum())
    out["overlap_pct"] = 100.0 * float(part["comms_hidden_ns"].sum()) / total if total > 0 else None
    if rank_step is not None and len(rank_step):
        if "steady" in rank_step.columns:  # the steady steps (queries/steps/job_steps.sql)
            steady = rank_step[rank_step["steady"].astype(bool)]
            rank_step = steady if len(steady) else rank_step
        per_step = rank_step.groupby("step")["window_ns"].max()
        out.update(
            steps=int(len(per_step)),
            step_time_median_ns=float(per_step.median()),
            step_time_min_ns=int(per_step.min()),
            step_time_max_ns=int(per_step.max()),
        )
    return out


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def findings_html(findings: list, limit: int) -> str:
    """Top findings with severity, recoverable time, summary, fixes and the first evidence rows."""
    out = []
    for f in findings[:limit]:
        sev = str(_get(f, "severity", "info"))
        rec = _get(f, "recoverable_ns_per_step")
        pct = _get(f, "recoverable_pct")
        rec_text = (
            "not bounded"
            if rec is None
            else f"{fmt(rec, 'ns')} per step" + (f" ({pct:.1f}% of a step)" if pct is not None else "")
        )
        fixes = "".join(
            f"<li>{esc(_get(x, 'action'))}<br><small>trade-off: {esc(_get(x, 'trade_off'))}</small></li>"
            for x in (_get(f, "fixes") or [])
        )
        ev_html = ""
        for ev in (_get(f, "evidence") or [])[:1]:
            rows = pd.DataFrame(_get(ev, "rows") or [])
            if len(rows):
                cols = [(c, c, "text") for c in (_get(ev, "columns") or list(rows.columns))]
                ev_html = f"<p>{esc(_get(ev, 'description'))}</p>" + table(
                    rows, cols, f"evidence-{esc(_get(f, 'id'))}", max_rows=10
                )
        out.append(
            f'<div class="finding" data-finding="{esc(_get(f, "id"))}" data-severity="{esc(sev)}" '
            f'data-recoverable-ns="{esc(plain(rec) if rec is not None else "")}">'
            f'<b>{esc(_get(f, "title"))}</b> <span class="sev-{esc(sev)}">[{esc(sev)}]</span> '
            f"— recoverable: {esc(rec_text)}<br>{esc(_get(f, 'summary'))}"
            f"<details><summary>evidence and fixes</summary>{ev_html}<ul>{fixes}</ul></details></div>"
        )
    return "".join(out)


def headline(doc: ReportDocument, part: Part, figs: dict) -> str:
    body = []
    if not part.ok:
        body.append(missing(part.missing or ""))
        nums: dict[str, Any] = {}
    else:
        nums = headline_numbers(part.value, doc.rank_step.value if doc.rank_step.ok else None)
    cards = []
    if "step_time_median_ns" in nums:
        cards.append(
            kpi(
                "step time (median)",
                "step_time_median_ns",
                nums["step_time_median_ns"],
                fmt(nums["step_time_median_ns"], "ns"),
                f"{nums['steps']} steps, {fmt(nums['step_time_min_ns'], 'ns')} – "
                f"{fmt(nums['step_time_max_ns'], 'ns')}",
            )
        )
        cards.append(
            kpi(
                "step time spread",
                "step_time_spread_ns",
                nums["step_time_max_ns"] - nums["step_time_min_ns"],
                fmt(nums["step_time_max_ns"] - nums["step_time_min_ns"], "ns"),
                "max − min over steps",
            )
        )
    elif part.ok:
        cards.append(
            kpi("step time", "step_time_median_ns", None, "no steps", "the whole capture is one window")
        )
    for key, label in (
        ("gpu_busy_pct", "GPU busy"),
        ("comms_exposed_pct", "exposed comms"),
        ("overlap_pct", "comms overlap"),
    ):
        if key in nums:
            cards.append(kpi(label, key, nums[key], fmt(nums[key], "pct"), f"all {nums['ranks']} ranks"))
    if doc.verdict.ok and len(doc.verdict.value):
        v = doc.verdict.value.iloc[0]
        sub = ""
        if plain(v.get("straggler_rank")) is not None:
            sub = (
                f"straggler rank {plain(v['straggler_rank'])}, costs "
                f"{fmt(v.get('straggler_delay_ns'), 'ns')} of wall time"
            )
        elif plain(v.get("median_ratio")) is not None:
            sub = f"median max/mean compute {plain(v['median_ratio']):.3f}"
        cards.append(
            kpi("imbalance", "imbalance_verdict", plain(v["verdict"]), str(plain(v["verdict"])), sub)
        )
    else:
        cards.append(kpi("imbalance", "imbalance_verdict", None, "unknown", doc.verdict.missing or ""))
    mfu_notes: list[str] = []
    if doc.mfu.ok and isinstance(doc.mfu.value, dict):
        m = doc.mfu.value
        for key, label in (("mfu", "MFU"), ("hfu", "HFU")):
            val = plain(m.get(key))
            cards.append(
                kpi(
                    label,
                    key,
                    val,
                    "unknown" if val is None else f"{100 * val:.1f}%",
                    f"{m.get('precision', '')} dense peak" if val is not None else "see notes",
                )
            )
        mfu_notes = [str(x) for x in (m.get("notes") or [])] + [str(x) for x in (m.get("gap") or [])]
    else:
        cards.append(kpi("MFU / HFU", "mfu", None, "unknown", doc.mfu.missing or ""))
    body.append(f'<div class="kpis">{"".join(cards)}</div>')
    if doc.steps:
        body.append(
            notes([f"steps {doc.steps} only (--steps): partition, heatmap and timeline cover these steps"])
        )
    body.append(notes(mfu_notes))
    body.append("<h3>Top findings</h3>")
    if doc.findings.ok:
        found = list(doc.findings.value or [])
        body.append(findings_html(found, 5) if found else "<p>No findings: nothing crossed a threshold.</p>")
    else:
        body.append(missing(doc.findings.missing or ""))
    return section("headline", "Headline", "".join(body))
