"""Plotly figures of the report, built from the library's result tables (never from raw events).

Why a module of its own: each figure is a pure function of a DataFrame the library returned, so
it can be tested without a browser and reused (e.g. in notebooks). Every trace-provided string
(kernel names, host activities) is escaped before it reaches plotly, whose labels are HTML-like.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from .. import palette
from ..escape import html
from .timeline import NAME_CHARS

# Partition parts in stacking order: (column, label, colour), the colours used everywhere.
PARTS = palette.PARTS


def escape(text, limit: int = NAME_CHARS) -> str:
    """Trace text made inert for plotly's HTML-like labels (cut at `limit` characters)."""
    return html(text, limit)


BASE_LAYOUT = dict(
    template="plotly_white",
    margin=dict(l=60, r=20, t=40, b=40),
    hoverlabel=dict(align="left"),
    legend=dict(orientation="h", y=-0.15),
)


def _layout(fig: go.Figure, title: str, **kw) -> go.Figure:
    fig.update_layout(title=title, **{**BASE_LAYOUT, **kw})
    return fig


def partition_bars(part: pd.DataFrame) -> go.Figure:
    """Per-rank stacked bars of the exclusive parts (they sum to the window exactly)."""
    ranks = [f"rank {int(r)}" for r in part["rank"]]
    fig = go.Figure()
    for col, label, color in PARTS:
        if col not in part:
            continue
        ns = part[col].fillna(0).astype("int64")
        pct = 100.0 * ns / part["window_ns"].where(part["window_ns"] > 0)
        fig.add_bar(
            name=label,
            x=ranks,
            y=ns / 1e6,
            marker_color=color,
            customdata=list(zip(ns.tolist(), pct.fillna(0).tolist(), strict=True)),
            hovertemplate=f"%{{x}}<br>{label}: %{{customdata[0]:,}} ns (%{{y:,.3f}} ms, "
            "%{customdata[1]:.2f}% of window)<extra></extra>",
        )
    return _layout(
        fig,
        "Time partition per rank",
        barmode="stack",
        yaxis_title="ms",
        height=420 + (8 * len(ranks) if len(ranks) > 32 else 0),
    )


def rank_step_heatmap(rank_step: pd.DataFrame) -> go.Figure:
    """Rank x step heatmap of step time, with a button for compute time: stragglers stand out."""
    steps = sorted(int(s) for s in rank_step["step"].dropna().unique())
    ranks = sorted(int(r) for r in rank_step["rank"].unique())
    fig = go.Figure()
    for i, (col, label) in enumerate((("window_ns", "step time"), ("compute_ns", "compute time"))):
        grid = rank_step.pivot_table(index="rank", columns="step", values=col, aggfunc="first")
        grid = grid.reindex(index=ranks, columns=steps)
        fig.add_heatmap(
            z=(grid / 1e6).values.tolist(),
            x=[str(s) for s in steps],
            y=[f"rank {r}" for r in ranks],
            customdata=grid.astype("Int64").astype(object).where(grid.notna(), None).values.tolist(),
            colorscale="Viridis",
            colorbar=dict(title="ms"),
            visible=(i == 0),
            name=label,
            hovertemplate=f"%{{y}}, step %{{x}}<br>{label}: %{{customdata:,}} ns "
            "(%{z:,.3f} ms)<extra></extra>",
        )
    buttons = [
        dict(
            label=label,
            method="update",
            args=[{"visible": [j == i for j in range(2)]}, {"title.text": f"Rank x step: {label}"}],
        )
        for i, label in enumerate(("step time", "compute time"))
    ]
    return _layout(
        fig,
        "Rank x step: step time",
        xaxis_title="step",
        yaxis=dict(autorange="reversed"),
        updatemenus=[dict(buttons=buttons, direction="right", type="buttons", x=0, y=1.12, xanchor="left")],
        height=max(300, min(1400, 60 + 16 * len(ranks))),
    )


def overlap_bars(part: pd.DataFrame) -> go.Figure:
    """Per rank: communication hidden behind other GPU work vs exposed, with overlap % on hover."""
    ranks = [f"rank {int(r)}" for r in part["rank"]]
    hidden = part["comms_hidden_ns"].fillna(0).astype("int64")
    exposed = (part["comms_total_ns"].fillna(0) - part["comms_hidden_ns"].fillna(0)).astype("int64")
    overlap = part["overlap_pct"].astype(float)
    fig = go.Figure()
    for label, ns, color in (
        ("comms hidden", hidden, palette.COMMS_HIDDEN),
        ("comms not hidden", exposed, palette.COMMS_EXPOSED),
    ):
        fig.add_bar(
            name=label,
            x=ranks,
            y=ns / 1e6,
            marker_color=color,
            customdata=list(zip(ns.tolist(), overlap.fillna(-1).tolist(), strict=True)),
            hovertemplate=f"%{{x}}<br>{label}: %{{customdata[0]:,}} ns<br>"
            "overlap: %{customdata[1]:.2f}%<extra></extra>",
        )
    return _layout(fig, "Communication overlap per rank", barmode="stack", yaxis_title="ms")


def collective_skew(coll: pd.DataFrame) -> go.Figure:
    """Distribution of arrival skew per collective operation (matched instances only)."""
    fig = go.Figure()
    matched = coll[coll["ranks"] > 1]
    for (op, comm), g in matched.groupby(["op", "comm"], sort=True):
        label = escape(f"{op} {comm}")
        fig.add_box(
            name=label,
            y=g["start_skew_ns"] / 1e3,
            boxpoints="outliers",
            hovertemplate=f"{label}<br>arrival skew %{{y:,.1f}} µs<extra></extra>",
        )
    return _layout(fig, "Collective arrival skew (last − first arrival)", yaxis_title="µs", showlegend=False)


def collective_waits(rollup: pd.DataFrame) -> go.Figure:
    """Per rank: collective wait suffered (waiting for others) and caused (others waiting for it)."""
    ranks = [f"rank {int(r)}" for r in rollup["rank"]]
    fig = go.Figure()
    for col, label, color in (
        ("wait_suffered_ns", "wait suffered", palette.WAIT_SUFFERED),
        ("wait_caused_ns", "wait caused", palette.WAIT_CAUSED),
    ):
        ns = rollup[col].fillna(0).astype("int64")
        fig.add_bar(
            name=label,
            x=ranks,
            y=ns / 1e6,
            marker_color=color,
            customdata=ns.tolist(),
            hovertemplate=f"%{{x}}<br>{label}: %{{customdata:,}} ns<extra></extra>",
        )
    return _layout(fig, "Collective waits per rank", barmode="group", yaxis_title="ms")


def top_kernels(top: pd.DataFrame) -> go.Figure:
    """Horizontal bars of the kernels taking the most GPU time (summed over ranks)."""
    top = top.iloc[::-1]
    labels = [f"{i}. {escape(n, 70)}" for i, n in zip(range(len(top), 0, -1), top["name"], strict=True)]
    fig = go.Figure()
    fig.add_bar(
        orientation="h",
        y=labels,
        x=top["total_ns"] / 1e6,
        marker_color=[palette.CATEGORY.get(c, palette.CATEGORY["other"]) for c in top["category"]],
        customdata=list(
            zip(
                top["total_ns"].astype("int64").tolist(),
                top["instances"].astype("int64").tolist(),
                [escape(c) for c in top["category"]],
                strict=True,
            )
        ),
        hovertemplate="%{y}<br>%{customdata[0]:,} ns in %{customdata[1]:,} launches "
        "(%{customdata[2]})<extra></extra>",
    )
    return _layout(
        fig,
        "Top kernels by GPU time (all ranks)",
        xaxis_title="ms",
        height=max(300, 26 * len(top) + 100),
        margin=dict(l=420, r=20, t=40, b=40),
    )


def idle_causes(gaps: pd.DataFrame) -> go.Figure:
    """Idle time of the whole capture by cause, per rank (pieces of the `gaps` view)."""
    fig = go.Figure()
    ranks = sorted(int(r) for r in gaps["rank"].unique())
    for cause, g in gaps.groupby("cause", sort=True):
        g = g.set_index("rank").reindex(ranks)
        ns = g["total_ns"].fillna(0).astype("int64")
        fig.add_bar(
            name=escape(cause),
            x=[f"rank {r}" for r in ranks],
            y=ns / 1e6,
            marker_color=palette.category(cause),
            customdata=list(zip(ns.tolist(), g["pieces"].fillna(0).astype("int64").tolist(), strict=True)),
            hovertemplate=f"%{{x}}<br>{escape(cause)}: %{{customdata[0]:,}} ns in "
            "%{customdata[1]:,} pieces<extra></extra>",
        )
    return _layout(fig, "Idle time by cause per rank (whole capture)", barmode="stack", yaxis_title="ms")


def timeline_layout(n_ranks: int, rows: tuple[str, ...], width_ms: float, title: str) -> dict:
    """Layout of the aligned timeline; its traces are built in the page from the compact payload."""
    lanes = n_ranks * len(rows)
    return dict(
        title=title,
        template="plotly_white",
        hovermode="closest",
        dragmode="zoom",
        showlegend=True,
        legend=dict(orientation="h", y=1.02, yanchor="bottom"),
        margin=dict(l=110, r=20, t=80, b=40),
        height=max(320, min(4000, 120 + 14 * lanes)),
        xaxis=dict(title="ms from window start (aligned)", range=[0, width_ms], zeroline=False),
        yaxis=dict(
            autorange="reversed",
            tickmode="array",
            zeroline=False,
            fixedrange=False,
            tickfont=dict(size=9),
            range=[lanes - 0.5, -0.5],
        ),
    )
