"""The report section "What fixing each cause would buy": the what-if replay and the slow ranks' causes.

Rows come from the stored `whatif` and `rank_attribution` tables (docs/whatif.md), with each
slow rank's evidence and the scenarios' words, in the report document (report_doc).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .html import esc, missing, section, table

if TYPE_CHECKING:
    from ...report_doc.document import ReportDocument

SID, TITLE = "whatif", "What fixing each cause would buy"
WHATIF_TABLE = [
    ("scenario", "scenario", "text"),
    ("actual_step_time_ns", "actual step", "ns"),
    ("step_time_ns", "step without the cause", "ns"),
    ("gain_ns", "gain per step", "ns"),
    ("gain_pct", "gain", "pct"),
    ("fixed_ranks", "ranks replaced", "text"),
]
ATTRIBUTION_TABLE = [
    ("rank", "rank", ""),
    ("cause", "cause", "text"),
    ("excess_ns", "excess over median rank", "ns"),
    ("slow_gpu_ns", "slow GPU", "ns"),
    ("more_work_ns", "more work", "ns"),
    ("slow_host_ns", "slow host", "ns"),
    ("late_input_ns", "late input", "ns"),
    ("slow_link_ns", "slow links", "ns"),
    ("gpu_score", "GPU score", ""),
]


def whatif(doc: ReportDocument) -> str:
    w = doc.whatif
    if not w.ok:
        return section(SID, TITLE, missing(w.missing or ""))
    df = w.value.copy()
    df["gain_pct"] = 100.0 * df["gain_ns"] / df["replayed_actual_ns"].where(df["replayed_actual_ns"] > 0)
    body = [table(df, WHATIF_TABLE, "whatif-table")]
    a = doc.attribution
    if a.ok and not a.value.empty:
        body.append("<h3>Why the slow ranks are slow</h3>")
        body.append(table(a.value, ATTRIBUTION_TABLE, "attribution-table"))
        items = [
            f"<li>rank {int(r['rank'])}: {esc(r['cause'])}: {esc(ev or '')}</li>"
            for r, ev in zip(a.value.to_dict("records"), doc.attribution_evidence, strict=True)
            if isinstance(r.get("cause"), str)
        ]
        if items:
            body.append('<ul class="notes">' + "".join(items) + "</ul>")
    intro = (
        "The job's step time (its slowest rank's step window, mean over steps) if "
        + "; ".join(f"{k}: {v}" for k, v in doc.whatif_scenarios.items())
        + ". Computed by replaying the measured dependencies (a collective ends when its last participant "
        "arrives plus its transfer), so ranks that only wait gain only what the critical path gains."
    )
    return section(SID, TITLE, "".join(body), intro)
