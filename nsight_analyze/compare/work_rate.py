"""Work done per unit of time, before and after: the verdict's basis when a run has no steps."""

from __future__ import annotations

import math
from typing import Any

import duckdb

from ..errors import UserError
from ..store.duck import plain_records
from ..store.query_layer import statements
from .settings import CONFIG, SIDES, TRIM_LEVELS
from .sides import _total

SQL = statements("compare/work_rate")


def _overlap(s: str, e: str) -> str:
    """SQL: the share of a kernel instance inside [s, e) (a zero-length one counts by its start)."""
    return SQL.sql("instance_share", lo=s, hi=e)


def _kinds(side: int, cat: str, inner: str, edge: str, names: list[str]) -> str:
    """SQL: per rank and kind (name and launch configuration) of one side, its instances in the
    rank's window `w`, their durations and their summed shares of the window and of each cut:
    counted for the instances of positive length inside the innermost cut (`inner`: shares 1 and
    0s), per instance (`edge`, _overlap) for the others."""
    return SQL.sql(
        "counted_kinds",
        side=side,
        cat=cat,
        kind_key=SQL.sql("kind_key", name_col="k.name", config=", ".join("k." + c for c in CONFIG)),
        share_totals=", ".join(SQL.sql("share_total", col=c) for c in names),
        inner=inner,
        window_share=_overlap("lo", "hi"),
        edge=edge,
    )


def _stored_at(con: duckdb.DuckDBPyConnection, cat: str, fracs: dict[int, float]) -> bool:
    """Whether `cat` stores kernel_window_shares at exactly these trim fractions (level: frac)."""
    try:
        got = con.execute(SQL.sql("stored_trims", cat=cat)).fetchall()
    except duckdb.CatalogException:  # a workspace analysed before the table existed
        return False
    return not got or dict(got) == fracs and len(got) == len(fracs)


def _stored_kinds(side: int, cat: str, fracs: dict[int, float]) -> str:
    """SQL: the rows of `_kinds` for one side (its columns in its order: they are UNIONed
    positionally), read from its stored kernel_window_shares (one row per rank, kind and trim
    level; the shares summed there once per rank at analysis time)."""
    return SQL.sql(
        "stored_kinds",
        side=side,
        cat=cat,
        kind_key=SQL.sql("kind_key", name_col="name", config=", ".join(CONFIG)),
        config=", ".join(CONFIG),
        summed_cuts=", ".join(SQL.sql("summed_share", col=f"{c}{i}") for c in "fb" for i in fracs),
        cuts=", ".join(SQL.sql("stored_cut_shares", i=i) for i in fracs),
    )


def _work_rate(con: duckdb.DuckDBPyConnection, cats: dict[str, str], cfg: dict[str, float]) -> dict[str, Any]:
    """Work done per ns of window, before and after: the basis of a verdict without step times.

    Work = the non-communication kernels both runs launch, matched by name AND launch
    configuration (a different shape is different work), each instance valued at BEFORE's mean
    duration of its kind and clipped to the window: so a kernel that got slower does not count
    as more work, and fewer instances in the same time is less work. Window = each common rank's
    step windows (first start to last end), i.e. the capture when there are no steps. Rate =
    sum over ranks of work / sum of windows. Because a capture cuts iterations at arbitrary
    points, the rate is also computed on sub-windows trimmed by 0..rate_trim_pct % at either end
    (TRIM_LEVELS x TRIM_LEVELS per run); `range_pct` is the change between the extremes of the
    two runs (any cut of one against any cut of the other). Per-instance work is SQL: at the
    default trims it was done per rank at analysis time (the stored kernel_window_shares, read
    here a few rows per rank and kind); at other trims every kernel is clipped here (_kinds).
    """
    same = cats["before"] == cats["after"]  # a workspace against itself: its kernels read once
    trim = float(cfg["rate_trim_pct"]) / 100.0
    if not 0 <= trim < 0.5:
        raise UserError("rate_trim_pct must be at least 0 and below 50")
    tr = SQL.sql("trim_fractions", trim=trim, last_level=TRIM_LEVELS - 1, levels=TRIM_LEVELS)
    # The trims as DuckDB computes them, written back as exact DOUBLE literals: each rank's cut
    # points are columns of its window, and each instance's share of every cut a column of the
    # pass over the instances (no join of the instances to the trims).
    fracs = {int(i): float(f) for i, f in con.execute(tr).fetchall() if i > 0}
    cut_cols = ", ".join(SQL.sql("cut_points", frac=repr(f), i=i) for i, f in fracs.items())

    def pick(x: str) -> str:  # a kind's share of the cut tr.i at the front (f) or back (b)
        return SQL.sql("trim_case", whens=" ".join(SQL.sql("trim_when", i=i, x=x) for i in fracs))

    spans = (
        {"ov": ("lo", "hi")}
        | {f"f{i}": ("lo", f"cf{i}") for i in fracs}
        | {f"b{i}": (f"cb{i}", "hi") for i in fracs}
    )
    names = list(spans)
    both = SQL["side_rows"] if not same else SQL.sql("both_sides_from_one", shares=", ".join(names))
    sides = list(enumerate(SIDES))[: 1 if same else 2]
    last = max(fracs, default=None)
    inner = SQL.sql("inside_innermost_cut", last=last) if last else SQL["inside_window"]
    # An instance of positive length inside the innermost cut lies wholly in the window and in no
    # trimmed-off end: its shares are 1 and 0s, so those (most) instances are only counted; the
    # others, near the ends or without a length, get _overlap per instance.
    edge = ", ".join(SQL.sql("edge_share", share=_overlap(b, e), col=c) for c, (b, e) in spans.items())
    if all(_stored_at(con, cats[side], fracs) for _, side in sides):
        kinds = " UNION ALL ".join(_stored_kinds(i, cats[side], fracs) for i, side in sides)
    else:  # other trims than the stored table's: every kernel clipped here
        kinds = " UNION ALL ".join(_kinds(i, cats[side], inner, edge, names) for i, side in sides)
    con.execute(
        SQL.sql(
            "window_work",
            cut_cols=cut_cols,
            kinds=kinds,
            both=both,
            trims=tr,
            front_cut=pick("f"),
            back_cut=pick("b"),
        )
    )
    cuts = plain_records(con, SQL["cut_rates"])
    whole = plain_records(con, SQL["whole_window_rows"])
    busy = plain_records(
        con, " UNION ALL ".join(SQL.sql("busy_share", i=i, side=side) for i, side in enumerate(SIDES))
    )
    out: dict[str, Any] = {
        "basis": "kernel work per ns of window: the non-communication kernels both runs launch (same "
        "name and launch configuration), each instance valued at BEFORE's mean duration",
        "comparable": False,
        "why": None,
        "trim_pct": float(cfg["rate_trim_pct"]),
        "delta_pct": None,
        "range_pct": None,
        "per_rank": [],
    }
    for i, side in enumerate(SIDES):
        w = [r for r in whole if r["side"] == i]
        window, work, kernel, matched = (
            _total(r[c] for r in w) for c in ("window_ns", "work_ns", "kernel_ns", "matched_ns")
        )
        bp = [r["busy_pct"] for r in busy if r["side"] == i]
        out[side] = {
            "window_ns": window,
            "work_ns": work,
            "rate": work / window if window else None,
            "kernel_ns": kernel,
            "coverage_pct": 100.0 * matched / kernel if kernel else None,
            "busy_pct": float(bp[0]) if bp and bp[0] is not None else None,
        }
    rb, ra = out["before"]["rate"], out["after"]["rate"]
    cover = [out[s]["coverage_pct"] for s in SIDES]
    if not rb or ra is None:
        out["why"] = (
            "no kernel work in " + ("BEFORE's" if not rb else "AFTER's") + " windows of the common ranks"
        )
        return out
    if min(c or 0.0 for c in cover) < cfg["min_rate_coverage_pct"]:
        out["why"] = (
            f"the kernels both runs launch (same name and launch configuration) are only "
            f"{cover[0] or 0:.1f} % of BEFORE's and {cover[1] or 0:.1f} % of AFTER's "
            f"non-communication kernel time (< min_rate_coverage_pct "
            f"{cfg['min_rate_coverage_pct']:g} %): the runs do different work, so work per "
            "unit of time cannot be compared"
        )
        return out
    rates = {i: [r["rate"] for r in cuts if r["side"] == i and r["rate"] is not None] for i in (0, 1)}
    if min(rates[0], default=0.0) <= 0:  # a ratio to no work: the range would be unbounded
        out["why"] = (
            "a cut of BEFORE's windows holds none of the kernel work both runs do (its work rate is "
            "0), so how the windows are cut changes the rate without bound"
        )
        return out
    out["comparable"] = True
    out["delta_pct"] = 100.0 * (ra / rb - 1.0)
    out["range_pct"] = [
        100.0 * (min(rates[1], default=math.nan) / max(rates[0], default=math.nan) - 1.0),
        100.0 * (max(rates[1], default=math.nan) / min(rates[0], default=math.nan) - 1.0),
    ]
    per: dict[int, dict[int, dict[str, Any]]] = {}  # rank -> side -> its whole-window row
    for r in whole:
        per.setdefault(r["rank"], {})[r["side"]] = r
    for r, sides in sorted(per.items()):  # a few ranks
        if len(sides) < 2 or any(sides[i][c] is None for i in (0, 1) for c in ("work_ns", "window_ns")):
            continue  # a rank only one side has
        b = sides[0]["work_ns"] / sides[0]["window_ns"] if sides[0]["window_ns"] else None
        a = sides[1]["work_ns"] / sides[1]["window_ns"] if sides[1]["window_ns"] else None
        out["per_rank"].append(
            {
                "rank": int(r),
                "before_rate": b,
                "after_rate": a,
                "delta_pct": 100.0 * (a / b - 1.0) if a is not None and b else None,
            }
        )
    return out
