"""Work done per unit of time, before and after: the verdict's basis when a run has no steps."""

from __future__ import annotations

import math
from typing import Any

import duckdb

from ..duck import plain_records
from ..errors import UserError
from .settings import CONFIG, SIDES, TRIM_LEVELS
from .sides import _total

# Every sum of fractional values is taken in DECIMAL: a sum of DOUBLEs depends on the order its
# terms arrive in, which parallel aggregation does not fix, so the same two runs compared twice
# gave rates apart in the last digits.
EXACT = "DECIMAL(38, 9)"


def _overlap(s: str, e: str) -> str:
    """SQL: the share of a kernel instance inside [s, e) (a zero-length one counts by its start)."""
    return (
        f"CASE WHEN end_ns > start_ns THEN greatest(least(end_ns, {e}) - greatest(start_ns, {s}), 0)"
        f"::DOUBLE / (end_ns - start_ns) ELSE (start_ns >= {s} AND start_ns < {e})::DOUBLE END"
    )


def _kinds(side: int, cat: str, inner: str, edge: str, names: list[str]) -> str:
    """SQL: per rank and kind (name and launch configuration) of one side, its instances in the
    rank's window `w`, their durations and their summed shares of the window and of each cut:
    counted for the instances of positive length inside the innermost cut (`inner`: shares 1 and
    0s), per instance (`edge`, _overlap) for the others."""
    inst = (
        f"FROM {cat}.kernels k JOIN w ON w.side = {side} AND w.rank = k.rank "
        "WHERE k.end_ns >= w.lo AND k.start_ns < w.hi AND k.category IS DISTINCT FROM 'comms'"
    )
    kk = f"hash(k.name, {', '.join('k.' + c for c in CONFIG)})"
    dur = "(k.end_ns - k.start_ns)"
    return f"""
        SELECT {side} AS side, rank, kk, sum(n) AS n, sum(dur_sum) AS dur_sum, sum(dur_ov) AS dur_ov,
               {", ".join(f"coalesce(sum({c}), 0) AS {c}" for c in names)}
        FROM (SELECT k.rank, {kk} AS kk, count(*) AS n, sum({dur}) AS dur_sum, sum({dur}) AS dur_ov,
                     count(*)::DOUBLE AS ov
              {inst} AND k.end_ns > k.start_ns AND {inner} GROUP BY ALL
              UNION ALL BY NAME
              SELECT k.rank, {kk} AS kk, count(*) AS n, sum({dur}) AS dur_sum,
                     sum(({dur} * {_overlap("lo", "hi")})::{EXACT})::DOUBLE AS dur_ov, {edge}
              {inst} AND NOT (k.end_ns > k.start_ns AND {inner}) GROUP BY ALL)
        GROUP BY rank, kk"""


def _stored_at(con: duckdb.DuckDBPyConnection, cat: str, fracs: dict[int, float]) -> bool:
    """Whether `cat` stores kernel_window_shares at exactly these trim fractions (level: frac)."""
    try:
        got = con.execute(f"SELECT DISTINCT trim_level, trim_frac FROM {cat}.kernel_window_shares").fetchall()
    except duckdb.CatalogException:  # a workspace analysed before the table existed
        return False
    return not got or dict(got) == fracs and len(got) == len(fracs)


def _stored_kinds(side: int, cat: str, fracs: dict[int, float]) -> str:
    """SQL: the rows of `_kinds` for one side (its columns in its order: they are UNIONed
    positionally), read from its stored kernel_window_shares (one row per rank, kind and trim
    level; the shares summed there once per rank at analysis time)."""
    kk = f"hash(name, {', '.join(CONFIG)})"
    cuts = ", ".join(
        f"max(front_share) FILTER (WHERE trim_level = {i}) AS f{i}, "
        f"max(back_share) FILTER (WHERE trim_level = {i}) AS b{i}"
        for i in fracs
    )
    return f"""
        SELECT {side} AS side, rank, {kk} AS kk, sum(n) AS n, sum(dur_sum) AS dur_sum, sum(dur_ov) AS dur_ov,
               sum(ov) AS ov, {", ".join(f"sum({c}{i}) AS {c}{i}" for c in "fb" for i in fracs)}
        FROM (SELECT rank, name, {", ".join(CONFIG)}, any_value(instances) AS n,
                     any_value(total_ns) AS dur_sum, any_value(span_ns) AS dur_ov,
                     any_value(span_share) AS ov, {cuts}
              FROM {cat}.kernel_window_shares WHERE rank IN (SELECT rank FROM cmp_common)
              GROUP BY rank, name, {", ".join(CONFIG)})
        GROUP BY rank, kk"""


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
    tr = f"SELECT i, {trim} * i / {TRIM_LEVELS - 1} AS f FROM range({TRIM_LEVELS}) r(i)"
    # The trims as DuckDB computes them, written back as exact DOUBLE literals: each rank's cut
    # points are columns of its window, and each instance's share of every cut a column of the
    # pass over the instances (no join of the instances to the trims).
    fracs = {int(i): float(f) for i, f in con.execute(tr).fetchall() if i > 0}
    fs = {i: f"{f!r}::DOUBLE" for i, f in fracs.items()}
    cut_cols = ", ".join(
        f"lo + (hi - lo) * {f} AS cf{i}, hi - (hi - lo) * {f} AS cb{i}" for i, f in fs.items()
    )
    pick = "CASE tr.i " + " ".join(f"WHEN {i} THEN {{x}}{i}" for i in fs) + " END"
    spans = (
        {"ov": ("lo", "hi")}
        | {f"f{i}": ("lo", f"cf{i}") for i in fs}
        | {f"b{i}": (f"cb{i}", "hi") for i in fs}
    )
    names = list(spans)
    cols = "rank, kk, n, dur_sum, dur_ov, " + ", ".join(names)
    both = "SELECT * FROM a0" if not same else f"SELECT * FROM a0 UNION ALL SELECT 1 AS side, {cols} FROM a0"
    sides = list(enumerate(SIDES))[: 1 if same else 2]
    last = max(fs, default=None)
    inner = (
        f"k.start_ns >= w.cf{last} AND k.end_ns <= w.cb{last}"
        if last
        else "k.start_ns >= w.lo AND k.end_ns <= w.hi"
    )
    # An instance of positive length inside the innermost cut lies wholly in the window and in no
    # trimmed-off end: its shares are 1 and 0s, so those (most) instances are only counted; the
    # others, near the ends or without a length, get _overlap per instance.
    edge = ", ".join(f"sum(({_overlap(b, e)})::{EXACT})::DOUBLE AS {c}" for c, (b, e) in spans.items())
    if all(_stored_at(con, cats[side], fracs) for _, side in sides):
        kinds = " UNION ALL ".join(_stored_kinds(i, cats[side], fracs) for i, side in sides)
    else:  # other trims than the stored table's: every kernel clipped here
        kinds = " UNION ALL ".join(_kinds(i, cats[side], inner, edge, names) for i, side in sides)
    # Per side, rank and kind (name and launch configuration): the instances in the window, their
    # durations, and their summed shares of the window and of each cut (an instance's share of a
    # trimmed-off end is what the cut removes). BEFORE's mean duration of a kind values the
    # shares: sum(ref x share) over instances = ref x (summed shares) per kind.
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE cmp_wr AS
        WITH w AS (SELECT *, {cut_cols} FROM (
                   SELECT 0 AS side, * FROM before_win WHERE rank IN (SELECT rank FROM cmp_common)
                   UNION ALL SELECT 1, * FROM after_win WHERE rank IN (SELECT rank FROM cmp_common))),
        a0 AS MATERIALIZED ({kinds}),
        agg AS MATERIALIZED ({both}),
        ref AS MATERIALIZED (SELECT kk, sum(dur_sum) / sum(n) AS ref_ns FROM agg WHERE side = 0 GROUP BY kk
                HAVING kk IN (SELECT kk FROM agg WHERE side = 1)),
        tr AS ({tr}),
        whole AS (SELECT side, rank, sum((ref_ns * ov)::{EXACT}) AS work,
                         sum(dur_ov::{EXACT}) AS matched_ns
                  FROM agg JOIN ref USING (kk) GROUP BY side, rank),
        tot AS (SELECT side, rank, sum(dur_ov::{EXACT}) AS kernel_ns FROM agg GROUP BY side, rank),
        front AS (SELECT side, rank, tr.i, sum((ref_ns * {pick.format(x="f")})::{EXACT}) AS cut
                  FROM agg JOIN ref USING (kk) JOIN tr ON tr.i > 0 GROUP BY side, rank, tr.i),
        back AS (SELECT side, rank, tr.i, sum((ref_ns * {pick.format(x="b")})::{EXACT}) AS cut
                 FROM agg JOIN ref USING (kk) JOIN tr ON tr.i > 0 GROUP BY side, rank, tr.i),
        g AS (SELECT w.side, w.rank, a.i AS fi, b.i AS bi,
                     ((w.hi - w.lo) * (1 - a.f - b.f))::{EXACT} AS window_ns
              FROM w, tr a, tr b)
        SELECT g.*, coalesce(whole.work, 0) - coalesce(fc.cut, 0) - coalesce(bc.cut, 0) AS work_ns,
               coalesce(whole.matched_ns, 0) AS matched_ns, coalesce(tot.kernel_ns, 0) AS kernel_ns
        FROM g LEFT JOIN whole ON whole.side = g.side AND whole.rank = g.rank
        LEFT JOIN tot ON tot.side = g.side AND tot.rank = g.rank
        LEFT JOIN front fc ON fc.side = g.side AND fc.rank = g.rank AND fc.i = g.fi
        LEFT JOIN back bc ON bc.side = g.side AND bc.rank = g.rank AND bc.i = g.bi""")
    cuts = plain_records(
        con,
        "SELECT side, fi, bi, sum(work_ns) / nullif(sum(window_ns), 0) AS rate "
        "FROM cmp_wr GROUP BY side, fi, bi",
    )
    whole = plain_records(
        con,
        """SELECT side, rank, window_ns, work_ns, matched_ns, kernel_ns FROM cmp_wr
                        WHERE fi = 0 AND bi = 0 ORDER BY side, rank""",
    )
    busy = plain_records(
        con,
        " UNION ALL ".join(
            f"SELECT {i} AS side, 100.0 * sum(compute_ns + memory_ns + other_ns) / nullif(sum(window_ns), 0) "
            f"AS busy_pct FROM {side}_tp t WHERE rank IN (SELECT rank FROM cmp_common) AND (step IS NOT NULL "
            f"OR NOT EXISTS (SELECT 1 FROM {side}_tp u WHERE u.rank = t.rank AND u.step IS NOT NULL))"
            for i, side in enumerate(SIDES)
        ),
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
