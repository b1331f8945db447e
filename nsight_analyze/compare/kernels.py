"""Kernels and collectives matched across the runs: time per step, and faster/slower by their
per-instance durations (a rank test per kernel, in SQL over both catalogs).
"""

from __future__ import annotations

import math
from typing import Any

import duckdb
import numpy as np

from ..plain import jsonable
from ..store.duck import plain_records
from ..store.query_layer import statements
from .settings import CONFIG, SIDES, STATUSES
from .sides import _total
from .stats import _p_values, compare_samples

SQL = statements("compare/kernels")


def _duration_tests(
    con: duckdb.DuckDBPyConnection,
    table: str,
    sources: dict[str, str],
    keys: list[str],
    strata: list[str],
    same: bool = False,
    kinds: dict[str, str] | None = None,
) -> None:
    """Temp table `table`: per key, before/after per-instance durations compared within each stratum.

    `sources[side]` selects keys, strata and `v` (one instance's duration, ns). Per stratum (a
    launch configuration) present in both runs: Mann-Whitney U of AFTER against BEFORE from
    average ranks with ties, and the medians. Per key, combined over its strata (van Elteren's
    stratified test: weights 1 / (n + 1)): `stat` (weighted U - E[U]; > 0 = after longer),
    `var`, `cc` (continuity correction: half the smallest weight, so one stratum is exactly the
    plain test), `rel` (relative change of the stratum medians weighted by BEFORE's time in
    each), `configs` (strata in both runs). No instance reaches Python: SQL counts them.
    `same`: both sources are one table (a workspace against itself), read once.
    `kinds`: when given, the sources are already counted: rows (sk, v, w = instances) with `sk`
    the stratum's key, and `kinds[side]` gives each key's keys and strata (sk, key and strata
    columns; the stored kernel_kinds), so the counted rows carry no names.

    Why not scipy.stats.mannwhitneyu: the input is every kernel instance of both runs (millions
    of rows), per kernel and launch configuration, and scipy has no stratified (van Elteren)
    test; moving the instances into Python and testing group by group would cost more than the
    whole comparison. Per stratum the statistic is scipy's U with its tie-corrected variance
    (tests/test_compare.py checks it against scipy.stats); stats.py `_p_values` turns the
    combined statistic into a p-value.

    How: the instances are read once in SQL, into counts per stratum and distinct duration (cx
    before, cy after; or the stored counts summed); from those rows, sorted, numpy takes the
    ranks (from the counts below each value), the tie term and the medians (the one or two
    middle values found from the running counts: DuckDB's median, which averages the two middle
    values of an even count) with running sums per stratum (`_strata_stats`); SQL combines the
    strata per key.
    """
    cols = keys + strata
    part = ", ".join(cols)
    keep = ", ".join(SQL.sql("keep_stratum_value", col=c) for c in cols)
    if kinds is not None:
        counts = (
            SQL.sql("stored_counts_same", before=sources["before"])
            if same
            else SQL.sql("stored_counts_both", before=sources["before"], after=sources["after"])
        )
        names = " UNION ".join(
            SQL.sql("side_strata", columns=part, kinds=kinds[s]) for s in (("before",) if same else SIDES)
        )
        strata_sql = SQL.sql("stored_strata", columns=part, names=names)
    elif same:
        counts = SQL.sql("instance_counts_same", columns=part, keep=keep, before=sources["before"])
    else:
        counts = SQL.sql(
            "instance_counts_both", columns=part, keep=keep, before=sources["before"], after=sources["after"]
        )
    if kinds is None:
        strata_sql = SQL.sql("counted_strata", columns=part)
        con.execute(SQL.sql("store_counts", counts=counts))
        counts = SQL["stored_count_rows"]
    # counted rows (`kinds`) name their strata elsewhere, so they are read once, not stored first
    g = con.execute(SQL.sql("count_rows", counts=counts)).fetchnumpy()
    y = _strata_stats(*(np.asarray(g[c]) for c in ("sk", "v", "cx", "cy")))
    con.register("_cmp_strata_stats", y)
    try:
        con.execute(SQL.sql("key_tests", table=table, strata=strata_sql, keys=", ".join(keys)))
    finally:
        con.unregister("_cmp_strata_stats")
        con.execute(SQL["drop_counts"])


def _strata_stats(sk: np.ndarray, v: np.ndarray, cx: np.ndarray, cy: np.ndarray) -> dict[str, np.ndarray]:
    """Per stratum, from its counts per distinct value sorted by (sk, v): nx, ny, ra (AFTER's rank
    sum, average ranks for ties), tie (sum of c^3 - c over the tied groups), tb (BEFORE's summed
    values) and the medians mb, ma (the one or two middle values of each side, averaged: DuckDB's
    and numpy's median of the instances).

    Why numpy: the input is one row per stratum and distinct duration (about 600k on 64 ranks x
    200k kernels); running sums within strata are a cumsum minus each stratum's offset, which is
    several times faster than SQL window functions over the same rows. The columns are numpy
    arrays, which DuckDB scans as a registered table (no DataFrame: compare imports no pandas)."""
    cx, cy = cx.astype(np.int64), cy.astype(np.int64)
    if len(sk) == 0:
        cols = ("nx", "ny", "ra", "tie", "tb", "mb", "ma")
        return {"sk": sk, **{c: np.zeros(0) for c in cols}}
    start = np.flatnonzero(np.concatenate([[True], sk[1:] != sk[:-1]]))
    size = np.diff(np.append(start, len(sk)))

    def below(c: np.ndarray) -> np.ndarray:  # the stratum's count below each value
        cs = np.cumsum(c)
        return cs - c - np.repeat(cs[start] - c[start], size)

    c = cx + cy
    nx, ny = np.add.reduceat(cx, start), np.add.reduceat(cy, start)
    cf = c.astype(float)
    ra = np.add.reduceat(cy * (below(c) + (c + 1) / 2.0), start)
    tie = np.add.reduceat(cf * c * c - c, start)
    tb = np.add.reduceat(cx * v, start)

    def median(cn: np.ndarray, n: np.ndarray) -> np.ndarray:
        b, nn = below(cn), np.repeat(n, size)
        mid = (cn > 0) & (b <= nn // 2) & (b + cn > (nn - 1) // 2)
        k = np.add.reduceat(mid.astype(np.int64), start)
        tot = np.add.reduceat(np.where(mid, v, 0.0), start)
        return np.divide(tot, k, out=np.full(len(k), np.nan), where=k > 0)

    return {
        "sk": sk[start],
        "nx": nx,
        "ny": ny,
        "ra": ra,
        "tie": tie,
        "tb": tb,
        "mb": median(cx, nx),
        "ma": median(cy, ny),
    }


def _stored_kinds(con: duckdb.DuckDBPyConnection, cat: str) -> bool:
    """Whether `cat` stores kernel_kinds, kernel_duration_counts and _totals with one kind per key (a
    64-bit hash collision would merge two kinds: then the kernels are read)."""
    try:
        n, keys = con.execute(SQL.sql("kind_key_counts", config=", ".join(CONFIG), cat=cat)).fetchone()
        con.execute(SQL.sql("duration_tables_probe", cat=cat))
    except duckdb.CatalogException:
        return False
    return n == keys


def _common(whole: dict[str, bool] | None, side: str) -> str:
    """SQL filter of a side's per-rank rows to the common ranks; none when they are all its ranks
    (a semi-join over millions of kernels that keeps every row)."""
    return SQL["on_every_rank"] if whole and whole[side] else SQL["on_common_ranks"]


def _kernels(
    con: duckdb.DuckDBPyConnection,
    cats: dict[str, str],
    steps: dict[str, int],
    cfg: dict[str, float],
    whole: dict[str, bool] | None = None,
) -> dict[str, Any]:
    """Kernels matched by name over the common ranks, ranked by time gained or lost per step;
    faster/slower by their per-instance durations within each launch configuration.
    `whole[side]`: every rank of that side is a common rank."""
    same = cats["before"] == cats["after"]  # a workspace against itself: each side read once
    config = ", ".join(CONFIG)
    if all(_stored_kinds(con, cats[s]) for s in SIDES):
        # The stored counts (kernel_kinds, kernel_duration_counts): the same numbers as the
        # kernels' (tests/test_compare_stored.py), from a few rows per kind and distinct duration.
        kinds = {
            s: SQL.sql("stored_kinds", config=config, cat=cats[s], common=_common(whole, s)) for s in SIDES
        }
        agg = {s: SQL.sql("stored_name_totals", kinds=kinds[s]) for s in SIDES}
        counted = {
            s: SQL.sql("job_duration_counts", cat=cats[s])
            if whole and whole[s]
            else SQL.sql("rank_duration_counts", cat=cats[s], common=_common(whole, s))
            for s in SIDES
        }
        src = {s: SQL.sql("stratum_duration_counts", counted=counted[s], kinds=kinds[s]) for s in SIDES}
        _duration_tests(con, "cmp_kdur", src, ["name"], list(CONFIG), same=same, kinds=kinds)
    else:  # a workspace analysed before those tables existed: every kernel read here
        agg = {s: SQL.sql("kernel_name_totals", cat=cats[s], common=_common(whole, s)) for s in SIDES}
        src = {
            s: SQL.sql("kernel_durations", config=config, cat=cats[s], common=_common(whole, s))
            for s in SIDES
        }
        _duration_tests(con, "cmp_kdur", src, ["name"], list(CONFIG), same=same)
    rows = plain_records(
        con,
        SQL.sql(
            "kernel_diff",
            before=agg["before"],
            after=SQL["same_as_before"] if same else agg["after"],
            before_steps=int(steps["before"]),
            after_steps=int(steps["after"]),
        ),
    )
    return _diff_rows(rows, cfg, ["name"])


def _diff_rows(
    rows: list[dict[str, Any]],
    cfg: dict[str, float],
    keys: list[str],
    per_step: dict[tuple, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Status (added/removed/faster/slower/unchanged/reshaped), ranking and totals of a matched table.

    faster/slower: the per-instance durations differ significantly (p < alpha) AND their median
    changed by at least min_effect_pct in the same direction. Instance counts and total time
    never decide it (a fixed-length capture of a slower job holds fewer instances).
    `per_step` (collectives of runs with steps): per key, compare_samples of its time per step
    window; where it has an interval, the status follows it instead (`_step_status`), and every
    row says its basis.
    """
    if not rows:
        return {"totals": {"before_ns": 0, "after_ns": 0, "delta_ns": 0}, "counts": {}, "rows": []}
    eff = cfg["min_effect_pct"]
    p_values = _p_values([r["stat"] for r in rows], [r["var"] for r in rows], [r["cc"] for r in rows])
    out = []
    for r, p in zip(rows, p_values.tolist(), strict=True):
        delta_pct = math.nan if r["rel"] is None else 100.0 * r["rel"]
        configs = int(r["configs"] or 0)
        sig = p < cfg["alpha"]  # False for NaN (no test)
        stat = r["stat"] or 0
        d = 0.0 if math.isnan(delta_pct) else delta_pct
        if r["added"]:
            status = "added"
        elif r["removed"]:
            status = "removed"
        elif configs == 0:
            status = "reshaped"
        elif sig and d <= -eff and stat < 0:
            status = "faster"
        elif sig and d >= eff and stat > 0:
            status = "slower"
        else:
            status = "unchanged"
        row = {k: v for k, v in r.items() if k not in _DROPPED}
        row.update(duration_p_value=p, duration_delta_pct=delta_pct, duration_configs=configs, status=status)
        if per_step is not None:
            st = per_step.get(tuple(r[k] for k in keys))
            judged = st is not None and st["ci_pct"] is not None and status not in ("added", "removed")
            row.update(
                step_delta_pct=st["delta_pct"] if st else None,
                step_ci_pct=st["ci_pct"] if st else None,
                step_p_value=st["p_value"] if st else None,
                status_basis="time_per_step" if judged else "duration",
            )
            if judged:
                row["status"] = _step_status(st, cfg)
        out.append({k: jsonable(v) for k, v in row.items()})
    # the largest change per step first, then by the keys (a NULL key last), as the rows were sorted
    out.sort(
        key=lambda r: (
            -abs(r["delta_per_step_ns"]),
            *((r[k] is None, 0 if r[k] is None else r[k]) for k in keys),
        )
    )
    counts = {s: sum(r["status"] == s for r in out) for s in STATUSES}
    totals = {
        "before_ns": int(sum(r["before_ns"] for r in out)),
        "after_ns": int(sum(r["after_ns"] for r in out)),
    }
    totals["delta_ns"] = totals["after_ns"] - totals["before_ns"]
    totals["before_per_step_ns"] = _total(r["before_per_step_ns"] for r in out)
    totals["after_per_step_ns"] = _total(r["after_per_step_ns"] for r in out)
    totals["delta_per_step_ns"] = totals["after_per_step_ns"] - totals["before_per_step_ns"]
    return {"totals": totals, "counts": counts, "rows": out}


# the matched table's inputs of the status, not shown
_DROPPED = {"added", "removed", "configs", "stat", "var", "cc", "rel"}

# Bootstrap streams of the collectives' per-step samples: above every rank's (1 + rank).
COLLECTIVE_STREAM = 1 << 24


def _step_status(st: dict[str, Any], cfg: dict[str, float]) -> str:
    """slower / faster / unchanged of a time per step, by the step-time verdict's rule
    (verdict.verdict_of): significant (p < alpha), the whole interval on one side of 0, and a
    median change of at least min_effect_pct."""
    p, (lo, hi), d = st["p_value"], st["ci_pct"], st["delta_pct"]
    significant = p is not None and p < cfg["alpha"]
    if significant and lo > 0 and d >= cfg["min_effect_pct"]:
        return "slower"
    if significant and hi < 0 and d <= -cfg["min_effect_pct"]:
        return "faster"
    return "unchanged"


def _collective_steps(
    con: duckdb.DuckDBPyConnection, cats: dict[str, str], cfg: dict[str, float]
) -> dict[tuple, dict[str, Any]]:
    """Per (op, bytes): compare_samples of its NCCL kernel time per step window, summed over the
    common ranks (a kernel belongs to the step window it starts in; a step without the
    collective counts 0), for every step window of each run.

    Why not the per-instance durations: an NCCL kernel's duration includes the wait for its
    peers, and a step can run more or fewer instances; the time a collective costs a step is
    what it adds to the step time (issue: AllReduce "unchanged" beside +9.87 ms per step)."""
    per = {}
    for side in SIDES:
        cat = cats[side]
        if side == "after" and cat == cats["before"]:  # a workspace against itself: its views too
            per[side] = per["before"]
            continue
        per[side] = {
            (r[0], r[1]): r[2]
            for r in con.execute(SQL.sql("collective_step_times", side=side, cat=cat)).fetchall()
        }
    both = sorted(set(per["before"]) & set(per["after"]), key=lambda k: (str(k[0]), k[1] is None, k[1] or 0))
    return {
        key: compare_samples(
            np.array(per["before"][key]), np.array(per["after"][key]), cfg, stream=COLLECTIVE_STREAM + i
        )
        for i, key in enumerate(both)
    }


def _collectives(
    con: duckdb.DuckDBPyConnection,
    cats: dict[str, str],
    steps: dict[str, int],
    cfg: dict[str, float],
    whole: dict[str, bool] | None = None,
    by_step: bool = False,
) -> dict[str, Any]:
    """NCCL work matched by (op, bytes): kernel time over common ranks, instances, arrival skew;
    faster/slower by its time per step window when both runs have steps (`by_step`: enough of
    them for an interval), else by the NCCL kernels' per-instance durations."""
    q = {
        s: SQL.sql(
            "collective_side",
            kernels=SQL.sql("collective_kernel_totals", cat=cats[s], common=_common(whole, s)),
            arrivals=SQL.sql("collective_arrivals", cat=cats[s]),
        )
        for s in SIDES
    }
    same = cats["before"] == cats["after"]
    src = {s: SQL.sql("collective_durations", cat=cats[s], common=_common(whole, s)) for s in SIDES}
    _duration_tests(con, "cmp_cdur", src, ["op", "bytes"], [], same=same)
    rows = plain_records(
        con,
        SQL.sql(
            "collective_diff",
            before=q["before"],
            after=SQL["same_as_before"] if same else q["after"],
            before_steps=int(steps["before"]),
            after_steps=int(steps["after"]),
        ),
    )
    return _diff_rows(rows, cfg, ["op", "bytes"], _collective_steps(con, cats, cfg) if by_step else None)
