"""The HTML diff of two runs: partition bars side by side, step-time distributions, waterfalls.

Why a separate module: it only renders the `compare()` dict (no SQL), so the page and the JSON
can never disagree. The page is self-contained (plotly.js inlined once, no network: clusters are
air-gapped) and safe with hostile trace text: every string shown goes through `render.escape.html`,
and figure JSON sits in inert `application/json` blocks (`render.escape.script_json`: `<`, `>` and
`&` written as JSON escapes). Colours are the report's (`render.palette`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .. import partition
from ..export import write_atomically
from . import palette
from .escape import html as esc
from .escape import script_json as safe_json

WATERFALL_ITEMS = 12
TABLE_ROWS = 40
BAR_PARTS = tuple(col for col, _, _ in palette.PARTS)  # memory as memory kernels + copies
BAR_LABEL = {col: label for col, label, _ in palette.PARTS} | {"memory_ns": "memory"}
BAR_COLOUR = palette.PART_COLOUR | {"memory_ns": palette.CATEGORY["memory"]}
# The partition table's rows (column, label): the parts with memory's total and its two parts,
# idle with its causes, then the window and all copy time (partition.py's columns).
TABLE_PARTS = (
    ("compute_ns", "compute"),
    ("memory_ns", "memory (kernels + copies)"),
    ("memory_kernels_ns", "memory kernels"),
    ("copies_ns", "copies"),
    ("other_ns", "other"),
    ("comms_exposed_ns", "comms exposed"),
    ("idle_ns", "idle"),
    *((col, label) for col, label, _ in palette.PARTS if col in partition.IDLE_PARTS),
    ("window_ns", "window"),
    ("copies_total_ns", "copies incl. hidden"),
)


def _ms(ns: float | None) -> float | None:
    """ms; None (unknown) for None and NaN: figure JSON holds no NaN (escape.script_json)."""
    return None if ns is None or ns != ns else ns / 1e6


def _num(value: Any, digits: int = 3, suffix: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}{suffix}"
    return f"{value:,}{suffix}"


def _bar_parts(blocks: list[dict[str, Any]]) -> tuple[str, ...]:
    """The parts a bar stacks: memory as memory kernels and copies, or as its total where a run's
    split is unknown (a workspace whose stored partition predates it), so the bars still tile."""
    if all(b.get(c) is not None for b in blocks for c in partition.MEMORY_PARTS):
        return BAR_PARTS
    first, *rest = partition.MEMORY_PARTS
    return tuple("memory_ns" if c == first else c for c in BAR_PARTS if c not in rest)


def partition_figure(result: dict[str, Any]) -> dict[str, Any]:
    """Stacked bars, before and after side by side for every rank and the total (ms per step)."""
    per = result["partition"]["per_rank"]
    groups = [(f"rank {p['rank']}", p) for p in per]
    if result["partition"]["total"]:
        groups.append(("total", result["partition"]["total"]))
    x = [[g for g, _ in groups for _ in (0, 1)], [s for _ in groups for s in ("before", "after")]]
    data = []
    for part in _bar_parts([p[side] for _, p in groups for side in ("before", "after")]):
        y = [_ms(p[side][part]) for _, p in groups for side in ("before", "after")]
        data.append(
            {
                "type": "bar",
                "name": BAR_LABEL[part],
                "x": x,
                "y": y,
                "marker": {"color": BAR_COLOUR[part]},
            }
        )
    layout = {
        "barmode": "stack",
        "title": {"text": "Time partition per step window (ms)"},
        "yaxis": {"title": {"text": "ms per step"}},
        "legend": {"orientation": "h"},
    }
    return {"data": data, "layout": layout}


def steps_figure(result: dict[str, Any]) -> dict[str, Any]:
    """Distributions of the slowest rank's step time (box + every step) and per-step values by index."""
    samples = result["step_time"]["slowest_samples_ns"]
    data: list[dict[str, Any]] = [
        {
            "type": "box",
            "name": side,
            "y": [v / 1e6 for v in samples[side]],
            "boxpoints": "all",
            "jitter": 0.4,
            "xaxis": "x",
            "yaxis": "y",
        }
        for side in ("before", "after")
    ]
    steps = result["step_time"]["per_step"]
    xs = [s["step"] if s["step"] is not None else "capture" for s in steps]
    for side in ("before", "after"):
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": f"{side} by step",
                "x": xs,
                "y": [s[f"{side}_ns"] / 1e6 for s in steps],
                "xaxis": "x2",
                "yaxis": "y2",
            }
        )
    layout = {
        "title": {"text": "Slowest rank's step time (ms)"},
        "grid": {"rows": 1, "columns": 2},
        "xaxis": {"domain": [0, 0.35]},
        "xaxis2": {"domain": [0.45, 1], "title": {"text": "step"}},
        "yaxis": {"title": {"text": "ms"}},
        "yaxis2": {"anchor": "x2"},
    }
    return {"data": data, "layout": layout}


def _waterfall(
    title: str, start: tuple[str, float], items: list[tuple[str, float]], end: tuple[str, float]
) -> dict[str, Any]:
    labels = [esc(start[0])] + [esc(n) for n, _ in items] + [esc(end[0])]
    values = [start[1]] + [v for _, v in items] + [end[1]]
    measure = ["absolute"] + ["relative"] * len(items) + ["total"]
    data = [
        {
            "type": "waterfall",
            "orientation": "v",
            "x": labels,
            "y": values,
            "measure": measure,
            "increasing": {"marker": {"color": palette.WORSE}},
            "decreasing": {"marker": {"color": palette.BETTER}},
            "hovertemplate": "%{x}<br>%{y:.3f} ms<extra></extra>",
        }
    ]
    layout = {
        "title": {"text": esc(title)},
        "yaxis": {"title": {"text": "ms per step"}},
        "xaxis": {"tickangle": -30, "automargin": True},
        "showlegend": False,
    }
    return {"data": data, "layout": layout}


def _label(name: str, width: int = 40) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def kernel_waterfall(result: dict[str, Any]) -> dict[str, Any] | None:
    """Kernel time per step: before -> the largest kernel deltas -> the rest -> after (sums exactly);
    None when neither run has a kernel (its totals then carry no per-step values)."""
    k = result["kernels"]
    if "delta_per_step_ns" not in k["totals"]:
        return None
    rows = [r for r in k["rows"] if r["delta_per_step_ns"]][:WATERFALL_ITEMS]
    # numbered: truncated names can coincide, and plotly merges equal category labels
    items = [(f"{i}. {_label(r['name'])}", r["delta_per_step_ns"] / 1e6) for i, r in enumerate(rows, 1)]
    rest = k["totals"]["delta_per_step_ns"] / 1e6 - sum(v for _, v in items)
    if rows and abs(rest) > 1e-9:
        items.append(("other kernels", rest))
    return _waterfall(
        "Kernel time per step: largest changes (summed over ranks)",
        ("before", k["totals"]["before_per_step_ns"] / 1e6),
        items,
        ("after", k["totals"]["after_per_step_ns"] / 1e6),
    )


def category_waterfall(result: dict[str, Any]) -> dict[str, Any] | None:
    """Step window (summed over ranks): before -> change of every partition part -> after."""
    total = result["partition"]["total"]
    if not total:
        return None
    parts = [p for p in _bar_parts([total["before"], total["after"]]) if total["delta"][p]]
    items = [(BAR_LABEL[p], total["delta"][p] / 1e6) for p in parts]
    return _waterfall(
        "Step window by category (summed over ranks)",
        ("before", total["before"]["window_ns"] / 1e6),
        items,
        ("after", total["after"]["window_ns"] / 1e6),
    )


def _table(headers: list[str], rows: list[list[Any]], table_id: str) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table id="{esc(table_id)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _summary_table(result: dict[str, Any]) -> str:
    st = result["step_time"]
    rows = []
    for label, s in [("slowest", st["slowest"])] + [(f"rank {p['rank']}", p) for p in st["per_rank"]]:
        ci = s["ci_pct"] or [None, None]
        rows.append(
            [
                label,
                _num(_ms(s["before"]["median_ns"])),
                _num(_ms(s["after"]["median_ns"])),
                _num(s["delta_pct"], 2, "%"),
                _num(ci[0], 2, "%"),
                _num(ci[1], 2, "%"),
                _num(s["p_value"], 4),
            ]
        )
    return _table(
        ["series", "before median ms", "after median ms", "change", "CI low", "CI high", "p"],
        rows,
        "step-time",
    )


def _partition_table(result: dict[str, Any]) -> str:
    """The partition summed over ranks (ms per step window), before, after and the change: memory's
    total and its two parts, memory-bound kernels and copies, on rows of their own."""
    total = result["partition"]["total"]
    if not total:
        return "<p>No partition: the ranks compared have no time partition (no GPU operation).</p>"
    b, a = total["before"], total["after"]
    rows = [
        [
            label,
            _num(_ms(b[col])),
            _num(_ms(a[col])),
            _num(None if None in (a[col], b[col]) else _ms(a[col] - b[col])),
            *(
                _num(100 * s[col] / s["window_ns"] if s[col] is not None and s["window_ns"] else None, 1, "%")
                for s in (b, a)
            ),
        ]
        for col, label in TABLE_PARTS
        if col in b
    ]
    return _table(
        ["part", "before ms", "after ms", "Δ ms", "before % of window", "after % of window"],
        rows,
        "partition",
    )


def _diff_table(block: dict[str, Any], keys: list[str], table_id: str) -> str:
    # collectives of runs with steps: their status follows the time per step, shown beside
    by_steps = any(r.get("status_basis") == "time_per_step" for r in block["rows"][:TABLE_ROWS])
    rows = [
        [r["status"]]
        + [r[k] for k in keys]
        + [
            _num(r["before_instances"]),
            _num(r["after_instances"]),
        ]
        + ([_num(r.get("step_delta_pct"), 2, "%"), _num(r.get("step_p_value"), 4)] if by_steps else [])
        + [
            _num(r.get("duration_delta_pct"), 2, "%"),
            _num(r.get("duration_p_value"), 4),
            _num(_ms(r["before_per_step_ns"])),
            _num(_ms(r["after_per_step_ns"])),
            _num(_ms(r["delta_per_step_ns"])),
            _num(_ms(r["delta_ns"])),
        ]
        for r in block["rows"][:TABLE_ROWS]
    ]
    return _table(
        ["status"]
        + keys
        + [
            "before n",
            "after n",
        ]
        + (["time per step Δ", "time per step p"] if by_steps else [])
        + [
            "duration Δ",
            "duration p",
            "before ms/step",
            "after ms/step",
            "Δ ms/step",
            "Δ ms total",
        ],
        rows,
        table_id,
    )


def _rate_table(result: dict[str, Any]) -> str:
    """Work per unit of time (the verdict's basis without steps)."""
    wr = result.get("work_rate")
    if not wr:
        return ""
    rows = [
        [
            side,
            _num(_ms(wr[side]["window_ns"])),
            _num(_ms(wr[side]["work_ns"])),
            _num(None if wr[side]["rate"] is None else 100 * wr[side]["rate"], 2, "%"),
            _num(wr[side]["busy_pct"], 2, "%"),
            _num(wr[side]["coverage_pct"], 1, "%"),
        ]
        for side in ("before", "after")
    ]
    table = _table(
        ["run", "window ms", "work ms", "work per window", "busy", "matched kernel time"], rows, "work-rate"
    )
    if wr["comparable"]:
        lo, hi = wr["range_pct"]
        note = (
            f"Change {_num(wr['delta_pct'], 2, '%')} ({_num(lo, 2, '%')} .. {_num(hi, 2, '%')} however "
            "the windows are cut)."
        )
    else:
        note = f"Not comparable: {wr['why']}"
    return f"{table}<p>{esc(wr['basis'])}. {esc(note)}</p>"


def _magnitude(value: Any, unit: str) -> str:
    if value is None:
        return "–"
    return (
        _num(_ms(value)) + " ms"
        if unit.startswith("ns")
        else _num(float(value), 2) + (" %" if unit == "pct" else "")
    )


def _findings_table(result: dict[str, Any]) -> str:
    f = result["findings"]
    if not f["available"]:
        return "<p>Findings not computed (diagnose unavailable or skipped).</p>"
    rows = [
        [
            c["status"],
            c["cause"],
            f"{', '.join(c['ids_before']) or '–'} → {', '.join(c['ids_after']) or '–'}",
            _magnitude(c["magnitude_before"], c["unit"]),
            _magnitude(c["magnitude_after"], c["unit"]),
            _num(c["delta_pct"], 1, "%"),
            f"{c['severity_before'] or '–'} → {c['severity_after'] or '–'}",
            c["title"],
        ]
        for c in f.get("causes", [])
    ]
    return _table(
        ["change", "cause", "findings", "before", "after", "Δ", "severity", "what it measures"],
        rows,
        "findings",
    )


CSS = """body{font-family:system-ui,sans-serif;margin:1.5em;max-width:1400px}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ddd;padding:3px 8px;
font-size:13px;text-align:left}td{max-width:700px;overflow-wrap:anywhere}
.verdict{font-size:1.3em;padding:.5em;border-radius:4px}.fig{height:480px}
""" + palette.css_rules(".{key}", "background", palette.VERDICT_BACKGROUND)


def render(result: dict[str, Any]) -> str:
    """The whole page as one string."""
    from plotly.offline import get_plotlyjs

    figures = [
        ("fig-partition", partition_figure(result)),
        ("fig-steps", steps_figure(result)),
        ("fig-kernels", kernel_waterfall(result)),
        ("fig-categories", category_waterfall(result)),
    ]
    figures = [(i, f) for i, f in figures if f is not None]
    v = result["verdict"]
    blocks = "".join(
        f'<div class="fig" id="{i}"></div>'
        f'<script type="application/json" id="{i}-data">{safe_json(f)}</script>'
        for i, f in figures
    )
    runs = "".join(
        f"<li>{esc(side)}: {esc(r['input'])} — {esc(r['ranks'])} ranks, {esc(r['steps'])} step "
        f"windows ({esc(r['step_source'])})</li>"
        for side, r in result["runs"].items()
    )
    notes = "".join(f"<li>{esc(n)}</li>" for n in result["notes"])
    ids = safe_json([i for i, _ in figures])
    kernels = _diff_table(result["kernels"], ["name", "category"], "kernels")
    basis = v.get("basis", "step_time")
    step_title = (
        "Step time"
        if basis == "step_time"
        else "Step or capture window time (not the verdict's basis: a run has no steps)"
    )
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>nsight-analyze compare: {esc(v["verdict"])}</title>
<style>{CSS}</style><script>{get_plotlyjs()}</script></head><body>
<h1>nsight-analyze compare</h1>
<p class="verdict {esc(v["verdict"])}" data-verdict="{esc(v["verdict"])}" data-basis="{esc(basis)}">\
{esc(v["reason"])}</p>
<ul>{runs}</ul>
<h2>Work per unit of time</h2>{_rate_table(result)}
<h2>{esc(step_title)}</h2>{_summary_table(result)}
<h2>Time partition (ms per step window, summed over ranks)</h2>{_partition_table(result)}
{blocks}
<h2>Kernels (ranked by time gained or lost per step; faster/slower by per-instance durations)</h2>{kernels}
<h2>Collectives (by type and size)</h2>{_diff_table(result["collectives"], ["op", "bytes"], "collectives")}
<h2>Findings</h2>{_findings_table(result)}
<h2>Notes</h2><ul>{notes}</ul>
<script>const drawn = [];
for (const id of {ids}) {{
  const fig = JSON.parse(document.getElementById(id + "-data").textContent);
  drawn.push(Plotly.newPlot(id, fig.data, fig.layout, {{responsive: true, displaylogo: false}}));
}}
Promise.all(drawn).then(() => {{ document.body.dataset.figuresRendered = String(drawn.length); }});
</script>
</body></html>
"""


def write_html(result: dict[str, Any], path: Path) -> None:
    write_atomically(path, render(result))
