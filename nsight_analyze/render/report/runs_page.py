"""The runs page: many runs of a workspace as one self-contained HTML file (`report --runs`,
`runs --html FILE`).

Why: a scaling series or a sweep is read as curves, not as ten tables: the efficiency curve
with where the loss goes stacked under it, the step time and MFU against the label that
changes, a metric over time with the best run marked. The page renders the finished document
`runs.runs()` returns (no SQL here); figures are plain plotly JSON and plotly.js comes from the
package data, as the report's; every label value and name is trace or user text and goes
through `render.escape` (`html.esc`, `html.safe_json`).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ... import __version__
from ...errors import UserError
from ...export import write_atomically
from ...runs import RunsResult, common_labels
from ...runs.scaling import LOSS_PARTS, scaling_line
from .. import palette
from .figures import _axis, _figure, escape, plotly_js
from .html import esc, notes, page, section

# Colours of the loss parts: the partition's colours for the same time (compute blue, comms
# red, idle grey-purple); imbalance is the straggler's wait (palette.WAIT_SUFFERED).
_LOSS_COLOUR = {
    "compute": palette.CATEGORY["compute"],
    "exposed_comms": palette.CATEGORY["comms"],
    "imbalance": palette.WAIT_SUFFERED,
    "idle": palette.CATEGORY["launch_gap"],
}
# A figure's height in pixels: without one plotly fills the 200 px of the .figure box, where the
# legend below the plot overlaps the axis' tick labels (seen in chromium: tests/test_runs_browser.py).
_HEIGHT = 380
_SECTIONS = [
    ("runs", "Runs"),
    ("scaling", "Scaling efficiency"),
    ("sweep", "Step time and MFU"),
    ("history", "Over time"),
    ("comms-dims", "Communication per dimension"),
]


def _x(result: RunsResult, r: dict[str, Any]) -> str:
    """A run's place on the x axis: its `--by` label value, else its name, else 'run N' (user
    text, made inert for plotly's HTML-like labels)."""
    if result.by and result.by in r["labels"]:
        return escape(f"{result.by}={r['labels'][result.by]}")
    return _run_name(r)


def _run_name(r: dict[str, Any]) -> str:
    """The run's name (inert for plotly), else 'run N'."""
    return escape(r["name"]) if r["name"] else f"run {r['job']}"


def _ms(ns: Any) -> float | None:
    return None if ns is None else ns / 1e6


def _cell(value: Any, text: str | None = None, nowrap: bool = False) -> str:
    """A cell with the exact value in data-value (tests and scripts read it, not the text).
    Numbers (and `nowrap` cells) stay on one line: the wide labels column squeezed the others
    until "54.8 %" broke before its "%" (seen in chromium: tests/test_runs_browser.py)."""
    shown = "–" if value is None else (text if text is not None else str(value))
    num = isinstance(value, (int, float)) and not isinstance(value, bool)
    cls = ' class="num"' if num else ""
    style = ' style="white-space:nowrap"' if num or nowrap else ""
    return f'<td{cls}{style} data-value="{esc("" if value is None else value)}">{esc(shown)}</td>'


def _runs_table(result: RunsResult) -> str:
    head = ["run", "name", "labels", "ranks", "GPU", "step median", "steps/s", "samples/s", "tokens/s", "MFU"]
    head += ["when"] if result.over else []
    head += [f"best ({result.metric})"] if result.metric else []
    common = common_labels(result)  # said once, above the table
    rows = []
    for r in result.rows:
        shown = " ".join(
            f"{k}={v}" for k, v in sorted(r["user_labels"].items()) if k != "name" and k not in common
        )
        cells = [
            _cell(r["job"]),
            _cell(r["name"]),
            _cell(shown or None),
            _cell(r["ranks_label"]),
            _cell(r["gpu"]),
            _cell(
                r["step_median_ns"],
                None if r["step_median_ns"] is None else f"{r['step_median_ns'] / 1e6:.3f} ms",
            ),
            _cell(r["steps_per_s"], None if r["steps_per_s"] is None else f"{r['steps_per_s']:.2f}"),
            _cell(r["samples_per_s"], None if r["samples_per_s"] is None else f"{r['samples_per_s']:,.1f}"),
            _cell(r["tokens_per_s"], None if r["tokens_per_s"] is None else f"{r['tokens_per_s']:,.0f}"),
            _cell(r["mfu"], None if r["mfu"] is None else f"{100 * r['mfu']:.1f} %"),
        ]
        if result.over:
            cells.append(_cell(r.get("when"), nowrap=True))
        if result.metric:
            cells.append(_cell("best" if r.get("best") else None))
        rows.append(f'<tr data-run="{esc(r["job"])}">{"".join(cells)}</tr>')
    header = "".join(f"<th>{esc(h)}</th>" for h in head)
    return (
        f'<div class="tablewrap"><table class="data" id="runs-table"><thead><tr>{header}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _common_intro(result: RunsResult) -> str:
    """The labels every run has alike (section() escapes them), said once above the table."""
    common = common_labels(result)
    return "Every run: " + " ".join(f"{k}={v}" for k, v in sorted(common.items())) if common else ""


def _scaling(result: RunsResult, figs: dict[str, Any]) -> str:
    """Efficiency (%) per run on top; under it, stacked, the points each part of the loss takes."""
    s = result.scaling
    if s is None:
        return section(
            "scaling",
            "Scaling efficiency",
            '<p class="missing">Not a scaling series: no --scaling and no runs labelled '
            "scaling=strong|weak.</p>",
        )
    known = [e for e in s["runs"] if e["efficiency"] is not None]
    known.sort(key=lambda e: (e["gpus"], e["job"]))
    x = [f"{e['gpus']} GPUs · {escape(e['name']) if e['name'] else 'run ' + str(e['job'])}" for e in known]
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "efficiency %",
            "x": x,
            "y": [100 * e["efficiency"] for e in known],
            "yaxis": "y",
            "line": {"color": palette.CATEGORY["compute"]},
        }
    ]
    for part in LOSS_PARTS:
        data.append(
            {
                "type": "bar",
                "name": f"lost: {part.replace('_', ' ')}",
                "x": x,
                "y": [e["loss"][part]["points"] for e in known],
                "yaxis": "y2",
                "marker": {"color": _LOSS_COLOUR[part]},
            }
        )
    figs["runs-scaling"] = _figure(
        data,
        f"{s['mode']} scaling against run {s['baseline']}",
        barmode="relative",
        height=520,
        yaxis=_axis("efficiency %", domain=[0.55, 1.0]),
        yaxis2=_axis("points lost", domain=[0.0, 0.45], anchor="x"),
    )
    lines = "".join(f"<li>{esc(scaling_line(e))}</li>" for e in s["runs"])
    return section(
        "scaling",
        "Scaling efficiency",
        f'<div class="figure" id="fig-runs-scaling"></div><ul class="scaling-lines">{lines}</ul>',
        intro=s["definition"],
    )


def _sweep(result: RunsResult, figs: dict[str, Any]) -> str:
    """Median step time (ms) and MFU (%) of each run against its label (`--by`), else per run."""
    have = [r for r in result.rows if r["step_median_ns"] is not None]
    if not have:
        return section(
            "sweep", "Step time and MFU", '<p class="missing">Not available: no run has steps.</p>'
        )
    x = [_x(result, r) for r in have]
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "step median (ms)",
            "x": x,
            "y": [_ms(r["step_median_ns"]) for r in have],
            "line": {"color": palette.CATEGORY["compute"]},
        }
    ]
    layout: dict[str, Any] = {"yaxis": _axis("step median (ms)")}
    if any(r["mfu"] is not None for r in have):  # MFU only where a run's label makes it known
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": "MFU %",
                "x": x,
                "y": [None if r["mfu"] is None else 100 * r["mfu"] for r in have],
                "yaxis": "y2",
                "line": {"color": palette.CATEGORY["comms"]},
            }
        )
        layout["yaxis2"] = _axis("MFU %", overlaying="y", side="right")
    best = [i for i, r in enumerate(have) if r.get("best")]
    if result.by and best:  # a sweep's best run (runs/select.py mark_best, by result.metric)
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": f"best ({result.metric})",
                "x": [x[i] for i in best],
                "y": [_ms(have[i]["step_median_ns"]) for i in best],
                "marker": {"size": 14, "symbol": "star", "color": palette.BETTER},
            }
        )
    title = f"against {result.by}" if result.by else "per run"
    figs["runs-sweep"] = _figure(data, f"step time and MFU {title}", height=_HEIGHT, **layout)
    return section("sweep", "Step time and MFU", '<div class="figure" id="fig-runs-sweep"></div>')


def _history(result: RunsResult, figs: dict[str, Any]) -> str:
    """The metric against time (`runs --over time`), the best run marked."""
    if not result.over or result.metric is None:
        return ""
    metric = result.metric
    have = [r for r in result.rows if r.get(metric) is not None]
    scale = (
        1e-6
        if metric.endswith("_ns")
        else 100.0
        if metric in ("mfu", "overlap") or metric.endswith("_share")
        else 1.0
    )
    unit = " (ms)" if metric.endswith("_ns") else " %" if scale == 100.0 else ""
    x = [escape(r["when"]) if r.get("when") else f"run {r['job']}" for r in have]
    best = [i for i, r in enumerate(have) if r.get("best")]
    data = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": metric,
            "x": x,
            "y": [r[metric] * scale for r in have],
            "text": [_run_name(r) for r in have],
            "line": {"color": palette.CATEGORY["compute"]},
        },
        {
            "type": "scatter",
            "mode": "markers",
            "name": "best",
            "x": [x[i] for i in best],
            "y": [have[i][metric] * scale for i in best],
            "marker": {"size": 14, "symbol": "star", "color": palette.BETTER},
        },
    ]
    figs["runs-history"] = _figure(data, f"{metric} over time", height=_HEIGHT, yaxis=_axis(metric + unit))
    return section("history", "Over time", '<div class="figure" id="fig-runs-history"></div>')


def _dimensions(result: RunsResult, figs: dict[str, Any]) -> str:
    """Exposed collective time per rank of each dimension along the runs: one line per
    dimension, so the one that stops scaling rises."""
    dims = sorted({d["dimension"] for r in result.rows for d in r["comms_by_dimension"]})
    if not dims:
        return ""
    x = [_x(result, r) for r in result.rows]
    data = []
    for dim in dims:
        y = []
        for r in result.rows:
            d = next((d for d in r["comms_by_dimension"] if d["dimension"] == dim), None)
            y.append(None if d is None else _ms(d["exposed_per_rank_ns"]))
        data.append({"type": "scatter", "mode": "lines+markers", "name": dim, "x": x, "y": y})
    figs["runs-dims"] = _figure(
        data, "exposed collective time per rank", height=_HEIGHT, yaxis=_axis("ms per rank")
    )
    return section(
        "comms-dims",
        "Communication per dimension",
        '<div class="figure" id="fig-runs-dims"></div>',
        intro="comm_groups summed per run and parallelism dimension over the whole capture, per rank "
        "(`nsight-analyze comms` for one run's communicators).",
    )


def render_runs_page(result: RunsResult) -> str:
    """The runs page as one HTML string."""
    if not result.rows:
        raise UserError("no run to show (check --where)")
    figs: dict[str, Any] = {}
    body = "".join(
        [
            section("runs", "Runs", _runs_table(result) + notes(result.notes), intro=_common_intro(result)),
            _scaling(result, figs),
            _sweep(result, figs),
            _history(result, figs),
            _dimensions(result, figs),
        ]
    )
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    subtitle = f"{len(result.rows)} run(s) · generated {stamp} by nsight-analyze {__version__}"
    nav = [(sid, label) for sid, label in _SECTIONS if f'id="{sid}"' in body]
    return page("nsight-analyze runs", subtitle, nav, body, figs, plotly_js())


def write_runs_page(result: RunsResult, out_path: str | Path) -> Path:
    """Write the runs page (complete or not at all: export.write_atomically); return its path."""
    out = Path(out_path)
    if out.is_dir():
        raise UserError(
            f"cannot write {out}: it is a folder; give the page's file name, e.g. {out / 'runs.html'}"
        )
    if not out.parent.is_dir():
        raise UserError(f"cannot write {out}: folder {out.parent} does not exist")
    write_atomically(out, render_runs_page(result))
    return out
