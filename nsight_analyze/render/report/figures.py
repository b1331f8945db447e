"""Plotly figures of the report as plain JSON data, built from the library's small result tables.

Why plain data: each figure is a pure function of a DataFrame the library returned (per rank,
per rank and step, top-N), so it can be tested without a browser; the figures are written as the
JSON plotly.js reads (traces and layout, with the plotly_white template plotly ships), without
importing plotly's Python figure classes, whose import and validation cost more than the rest of
the page. `tests/test_report.py` checks every figure against plotly's schema. Every
trace-provided string (kernel names, host activities) is escaped before it reaches plotly, whose
labels are HTML-like.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import palette
from ..escape import html
from .timeline import NAME_CHARS

# Partition parts in stacking order: (column, label, colour), the colours used everywhere.
PARTS = palette.PARTS
# plotly's "Viridis" (plotly.colors.sequential.Viridis), evenly spaced, as plotly writes the scale
_VIRIDIS = ("#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58")
VIRIDIS = [[i / 9, c] for i, c in enumerate((*_VIRIDIS, "#b5de2b", "#fde725"))]


def escape(text, limit: int = NAME_CHARS) -> str:
    """Trace text made inert for plotly's HTML-like labels (cut at `limit` characters)."""
    return html(text, limit)


def _package_data() -> Path:
    """plotly's package_data folder (plotly.js and the templates), found without importing plotly."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("plotly is not installed: the report inlines its plotly.js")
    return Path(list(spec.submodule_search_locations)[0]) / "package_data"


@functools.cache
def plotly_js() -> str:
    """plotly.js as plotly ships it (the text of plotly.offline.get_plotlyjs())."""
    return (_package_data() / "plotly.min.js").read_bytes().decode("utf-8")


@functools.cache
def template() -> dict[str, Any]:
    """The plotly_white template, as plotly writes it into a figure's layout."""
    return json.loads((_package_data() / "templates" / "plotly_white.json").read_text(encoding="utf-8"))


def values(series: Any) -> list:
    """A column as a JSON list: numpy scalars as Python numbers, NaN as null."""
    out = series.tolist() if hasattr(series, "tolist") else list(series)
    return [None if isinstance(v, float) and math.isnan(v) else v for v in out]


def _title(text: str) -> dict[str, str]:
    return {"text": text}


def _figure(data: list[dict[str, Any]], title: str, **layout: Any) -> dict[str, Any]:
    """{data, layout} with the report's base layout (template, margins, legend below)."""
    base = {
        "template": template(),
        "margin": {"l": 60, "r": 20, "t": 40, "b": 40},
        "hoverlabel": {"align": "left"},
        "legend": {"orientation": "h", "y": -0.15},
        "title": _title(title),
    }
    return {"data": data, "layout": {**base, **layout}}


def _axis(title: str, **kw: Any) -> dict[str, Any]:
    return {"title": _title(title), **kw}


def _rank_bars(
    label: str, ranks: list[str], ns: pd.Series, color: str, custom: list, hover: str
) -> dict[str, Any]:
    """One bar trace over the ranks: nanoseconds shown in ms, the exact values in the hover."""
    return {
        "type": "bar",
        "name": label,
        "x": ranks,
        "y": values(ns / 1e6),
        "marker": {"color": color},
        "customdata": custom,
        "hovertemplate": hover,
    }


def partition_bars(part: pd.DataFrame) -> dict[str, Any]:
    """Per-rank stacked bars of the exclusive parts (they sum to the window exactly)."""
    ranks = [f"rank {int(r)}" for r in part["rank"]]
    window = part["window_ns"].where(part["window_ns"] > 0)
    data = []
    for col, label, color in PARTS:
        if col not in part:
            continue
        ns = part[col].fillna(0).astype("int64")
        pct = (100.0 * ns / window).fillna(0)
        data.append(
            _rank_bars(
                label, ranks, ns, color, [list(p) for p in zip(ns.tolist(), pct.tolist(), strict=True)],
                f"%{{x}}<br>{label}: %{{customdata[0]:,}} ns (%{{y:,.3f}} ms, "
                "%{customdata[1]:.2f}% of window)<extra></extra>",
            )
        )  # fmt: skip
    return _figure(
        data,
        "Time partition per rank",
        barmode="stack",
        yaxis=_axis("ms"),
        height=420 + (8 * len(ranks) if len(ranks) > 32 else 0),
    )


def _grid(rank_step: pd.DataFrame, col: str, ranks: list[int], steps: list[int]) -> np.ndarray:
    """rank x step matrix of `col` (NaN where a rank has no such step; the first row wins)."""
    grid = np.full((len(ranks), len(steps)), np.nan)
    rows = rank_step.dropna(subset=["step"]).drop_duplicates(["rank", "step"])
    r = np.searchsorted(ranks, rows["rank"].to_numpy(dtype="int64"))
    s = np.searchsorted(steps, rows["step"].to_numpy(dtype="int64"))
    grid[r, s] = rows[col].to_numpy(dtype="float64", na_value=np.nan)
    return grid


def rank_step_heatmap(rank_step: pd.DataFrame) -> dict[str, Any]:
    """Rank x step heatmap of step time, with a button for compute time: stragglers stand out."""
    steps = sorted(int(s) for s in rank_step["step"].dropna().unique())
    ranks = sorted(int(r) for r in rank_step["rank"].unique())
    data = []
    for i, (col, label) in enumerate((("window_ns", "step time"), ("compute_ns", "compute time"))):
        grid = _grid(rank_step, col, ranks, steps)
        known = ~np.isnan(grid)
        data.append(
            {
                "type": "heatmap",
                "z": [values(row) for row in grid / 1e6],
                "x": [str(s) for s in steps],
                "y": [f"rank {r}" for r in ranks],
                "customdata": [
                    [int(v) if k else None for v, k in zip(row, ok, strict=True)]
                    for row, ok in zip(grid.tolist(), known.tolist(), strict=True)
                ],
                "colorscale": VIRIDIS,
                "colorbar": {"title": _title("ms")},
                "visible": i == 0,
                "name": label,
                "hovertemplate": f"%{{y}}, step %{{x}}<br>{label}: %{{customdata:,}} ns "
                "(%{z:,.3f} ms)<extra></extra>",
            }
        )
    buttons = [
        {
            "label": label,
            "method": "update",
            "args": [{"visible": [j == i for j in range(2)]}, {"title.text": f"Rank x step: {label}"}],
        }
        for i, label in enumerate(("step time", "compute time"))
    ]
    return _figure(
        data,
        "Rank x step: step time",
        xaxis=_axis("step"),
        yaxis={"autorange": "reversed"},
        updatemenus=[
            {
                "buttons": buttons,
                "direction": "right",
                "type": "buttons",
                "x": 0,
                "y": 1.12,
                "xanchor": "left",
            }
        ],
        height=max(300, min(1400, 60 + 16 * len(ranks))),
    )


def overlap_bars(part: pd.DataFrame) -> dict[str, Any]:
    """Per rank: communication hidden behind other GPU work vs exposed, with overlap % on hover."""
    ranks = [f"rank {int(r)}" for r in part["rank"]]
    hidden = part["comms_hidden_ns"].fillna(0).astype("int64")
    exposed = (part["comms_total_ns"].fillna(0) - part["comms_hidden_ns"].fillna(0)).astype("int64")
    overlap = part["overlap_pct"].astype(float).fillna(-1).tolist()
    data = [
        {
            "type": "bar",
            "name": label,
            "x": ranks,
            "y": values(ns / 1e6),
            "marker": {"color": color},
            "customdata": [list(p) for p in zip(ns.tolist(), overlap, strict=True)],
            "hovertemplate": f"%{{x}}<br>{label}: %{{customdata[0]:,}} ns<br>"
            "overlap: %{customdata[1]:.2f}%<extra></extra>",
        }
        for label, ns, color in (
            ("comms hidden", hidden, palette.COMMS_HIDDEN),
            ("comms not hidden", exposed, palette.COMMS_EXPOSED),
        )
    ]
    return _figure(data, "Communication overlap per rank", barmode="stack", yaxis=_axis("ms"))


def collective_skew(coll: pd.DataFrame) -> dict[str, Any]:
    """Distribution of arrival skew per collective operation (matched instances only)."""
    matched = coll[coll["ranks"] > 1]
    data = []
    for (op, comm), g in matched.groupby(["op", "comm"], sort=True):
        label = escape(f"{op} {comm}")
        data.append(
            {
                "type": "box",
                "name": label,
                "y": values(g["start_skew_ns"] / 1e3),
                "boxpoints": "outliers",
                "hovertemplate": f"{label}<br>arrival skew %{{y:,.1f}} µs<extra></extra>",
            }
        )
    return _figure(
        data, "Collective arrival skew (last − first arrival)", yaxis=_axis("µs"), showlegend=False
    )


def collective_waits(rollup: pd.DataFrame) -> dict[str, Any]:
    """Per rank: collective wait suffered (waiting for others) and caused (others waiting for it)."""
    ranks = [f"rank {int(r)}" for r in rollup["rank"]]
    data = []
    for col, label, color in (
        ("wait_suffered_ns", "wait suffered", palette.WAIT_SUFFERED),
        ("wait_caused_ns", "wait caused", palette.WAIT_CAUSED),
    ):
        ns = rollup[col].fillna(0).astype("int64")
        data.append(
            _rank_bars(
                label,
                ranks,
                ns,
                color,
                ns.tolist(),
                f"%{{x}}<br>{label}: %{{customdata:,}} ns<extra></extra>",
            )
        )
    return _figure(data, "Collective waits per rank", barmode="group", yaxis=_axis("ms"))


def top_kernels(top: pd.DataFrame) -> dict[str, Any]:
    """Horizontal bars of the kernels taking the most GPU time (summed over ranks)."""
    top = top.iloc[::-1]
    labels = [f"{i}. {escape(n, 70)}" for i, n in zip(range(len(top), 0, -1), top["name"], strict=True)]
    bar = {
        "type": "bar",
        "orientation": "h",
        "y": labels,
        "x": values(top["total_ns"] / 1e6),
        "marker": {"color": [palette.CATEGORY.get(c, palette.CATEGORY["other"]) for c in top["category"]]},
        "customdata": [
            list(p)
            for p in zip(
                top["total_ns"].astype("int64").tolist(),
                top["instances"].astype("int64").tolist(),
                [escape(c) for c in top["category"]],
                strict=True,
            )
        ],
        "hovertemplate": "%{y}<br>%{customdata[0]:,} ns in %{customdata[1]:,} launches "
        "(%{customdata[2]})<extra></extra>",
    }
    return _figure(
        [bar],
        "Top kernels by GPU time (all ranks)",
        xaxis=_axis("ms"),
        height=max(300, 26 * len(top) + 100),
        margin={"l": 420, "r": 20, "t": 40, "b": 40},
    )


def idle_causes(gaps: pd.DataFrame) -> dict[str, Any]:
    """Idle time of the whole capture by cause, per rank (pieces of the `gaps` view)."""
    ranks = sorted(int(r) for r in gaps["rank"].unique())
    data = []
    for cause, g in gaps.groupby("cause", sort=True):
        g = g.set_index("rank").reindex(ranks)
        ns = g["total_ns"].fillna(0).astype("int64")
        data.append(
            {
                "type": "bar",
                "name": escape(cause),
                "x": [f"rank {r}" for r in ranks],
                "y": values(ns / 1e6),
                "marker": {"color": palette.category(cause)},
                "customdata": [
                    list(p)
                    for p in zip(ns.tolist(), g["pieces"].fillna(0).astype("int64").tolist(), strict=True)
                ],
                "hovertemplate": f"%{{x}}<br>{escape(cause)}: %{{customdata[0]:,}} ns in "
                "%{customdata[1]:,} pieces<extra></extra>",
            }
        )
    return _figure(data, "Idle time by cause per rank (whole capture)", barmode="stack", yaxis=_axis("ms"))


def timeline_layout(n_ranks: int, rows: tuple[str, ...], width_ms: float, title: str) -> dict:
    """Layout of the aligned timeline; its traces are built in the page from the compact payload."""
    lanes = n_ranks * len(rows)
    return dict(
        title=_title(title),
        template=template(),
        hovermode="closest",
        dragmode="zoom",
        showlegend=True,
        legend=dict(orientation="h", y=1.02, yanchor="bottom"),
        margin=dict(l=110, r=20, t=80, b=40),
        height=max(320, min(4000, 120 + 14 * lanes)),
        xaxis=dict(title=_title("ms from window start (aligned)"), range=[0, width_ms], zeroline=False),
        yaxis=dict(
            autorange="reversed",
            tickmode="array",
            zeroline=False,
            fixedrange=False,
            tickfont=dict(size=9),
            range=[lanes - 0.5, -0.5],
        ),
    )
