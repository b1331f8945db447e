"""Kernels and collectives matched across the runs: time per step, and faster/slower by their
per-instance durations (a rank test per kernel, in SQL over both catalogs).
"""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
import pandas as pd

from ..render.data import records
from .settings import CONFIG, SIDES, STATUSES
from .sides import _df
from .stats import _p_values


def _duration_tests(
    con: duckdb.DuckDBPyConnection,
    table: str,
    sources: dict[str, str],
    keys: list[str],
    strata: list[str],
    same: bool = False,
) -> None:
    """Temp table `table`: per key, before/after per-instance durations compared within each stratum.

    `sources[side]` selects keys, strata and `v` (one instance's duration, ns). Per stratum (a
    launch configuration) present in both runs: Mann-Whitney U of AFTER against BEFORE from
    average ranks with ties, and the medians. Per key, combined over its strata (van Elteren's
    stratified test: weights 1 / (n + 1)): `stat` (weighted U - E[U]; > 0 = after longer),
    `var`, `cc` (continuity correction: half the smallest weight, so one stratum is exactly the
    plain test), `rel` (relative change of the stratum medians weighted by BEFORE's time in
    each), `configs` (strata in both runs). All per-instance work is here, in SQL.
    `same`: both sources are one table (a workspace against itself), read once.

    Why SQL and not scipy.stats.mannwhitneyu: the input is every kernel instance of both runs
    (millions of rows), per kernel and launch configuration, and scipy has no stratified
    (van Elteren) test; moving the instances into Python and testing group by group would cost
    more than the whole comparison. Per stratum the statistic is scipy's U with its tie-corrected
    variance (tests/test_compare.py checks it against scipy.stats); stats.py `_p_values` turns
    the combined statistic into a p-value.

    How: the instances are read once, into counts per stratum and distinct duration (cx before,
    cy after); the ranks (from the counts below each value), the tie term and the medians (the
    one or two middle values found from the running counts: DuckDB's median, which averages
    the two middle values of an even count) all come from those counts.
    """
    cols = keys + strata
    part = ", ".join(cols)
    kcols = ", ".join(keys)
    keep = ", ".join(f"any_value({c}) AS {c}" for c in cols)  # one value per stratum (sk)
    if same:
        counts = (
            f"SELECT hash({part}) AS sk, v, count(*) AS cx, count(*) AS cy, {keep} "
            f"FROM ({sources['before']}) GROUP BY sk, v"
        )
    else:
        counts = (
            f"SELECT hash({part}) AS sk, v, count(*) FILTER (WHERE side = 0) AS cx, "
            f"count(*) FILTER (WHERE side = 1) AS cy, {keep} "
            f"FROM (SELECT 0 AS side, * FROM ({sources['before']}) "
            f"UNION ALL SELECT 1 AS side, * FROM ({sources['after']})) GROUP BY sk, v"
        )
    # Strata are keyed by a hash (grouping and partitioning on long kernel names is what costs).
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE {table} AS
        WITH g AS MATERIALIZED ({counts}),
        strata AS (SELECT DISTINCT sk, {part} FROM g),
        r AS (SELECT sk, v, cx, cy, cx + cy AS c,
                     sum(cx + cy) OVER w - (cx + cy) AS below,
                     sum(cx) OVER w - cx AS bx, sum(cy) OVER w - cy AS by_
              FROM g WINDOW w AS (PARTITION BY sk ORDER BY v ROWS UNBOUNDED PRECEDING)),
        s AS (SELECT sk, sum(cx) AS nx, sum(cy) AS ny, sum(cy * (below + (c + 1) / 2.0)) AS ra,
                     sum(c::DOUBLE * c * c - c) AS tie, sum(cx * v) AS tb
              FROM r GROUP BY sk),
        m AS (SELECT r.sk,
                     avg(v) FILTER (WHERE cx > 0 AND bx <= s.nx // 2 AND bx + cx > (s.nx - 1) // 2) AS mb,
                     avg(v) FILTER (WHERE cy > 0 AND by_ <= s.ny // 2 AND by_ + cy > (s.ny - 1) // 2) AS ma
              FROM r JOIN s USING (sk) GROUP BY r.sk),
        y AS (SELECT st.*, s.nx, s.ny, s.ra, s.tie, s.tb, m.mb, m.ma, (s.nx + s.ny)::DOUBLE AS n,
                     1.0 / (s.nx + s.ny + 1) AS w, s.ra - s.ny * (s.ny + 1) / 2.0 - s.nx * s.ny / 2.0 AS du
              FROM s JOIN m USING (sk) JOIN strata st USING (sk) WHERE s.nx > 0 AND s.ny > 0)
        SELECT {kcols}, count(*) AS configs, sum(w * du) AS stat,
               sum(w * w * nx * ny / 12.0 * ((n + 1) - tie / (n * (n - 1)))) AS var, 0.5 * min(w) AS cc,
               sum(tb * (ma / mb - 1)) FILTER (WHERE mb > 0) / nullif(sum(tb) FILTER (WHERE mb > 0), 0) AS rel
        FROM y GROUP BY {kcols}""")


def _common(whole: dict[str, bool] | None, side: str) -> str:
    """SQL filter of a side's per-rank rows to the common ranks; none when they are all its ranks
    (a semi-join over millions of kernels that keeps every row)."""
    return "true" if whole and whole[side] else "rank IN (SELECT rank FROM cmp_common)"


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
    agg = (
        "SELECT name, mode(category) AS category, count(*) AS n, sum(end_ns - start_ns) AS t "
        "FROM {cat}.kernels WHERE {common} GROUP BY name"
    )
    src = (
        f"SELECT name, {', '.join(CONFIG)}, (end_ns - start_ns)::DOUBLE AS v FROM {{cat}}.kernels "
        "WHERE {common}"
    )
    agg, src = ({s: q.format(cat=cats[s], common=_common(whole, s)) for s in SIDES} for q in (agg, src))
    same = cats["before"] == cats["after"]  # a workspace against itself: each side read once
    _duration_tests(con, "cmp_kdur", src, ["name"], list(CONFIG), same=same)
    df = _df(
        con,
        f"""
        WITH b AS MATERIALIZED ({agg["before"]}), a AS ({"SELECT * FROM b" if same else agg["after"]}),
        j AS (
            SELECT coalesce(b.name, a.name) AS name, coalesce(a.category, b.category) AS category,
                   coalesce(b.n, 0)::BIGINT AS before_instances, coalesce(a.n, 0)::BIGINT AS after_instances,
                   coalesce(b.t, 0)::BIGINT AS before_ns, coalesce(a.t, 0)::BIGINT AS after_ns,
                   b.t / b.n AS before_avg_ns, a.t / a.n AS after_avg_ns,
                   b.name IS NULL AS added, a.name IS NULL AS removed
            FROM b FULL OUTER JOIN a ON a.name = b.name)
        SELECT j.*, after_ns - before_ns AS delta_ns,
               before_ns / $bs AS before_per_step_ns, after_ns / $as AS after_per_step_ns,
               after_ns / $as - before_ns / $bs AS delta_per_step_ns,
               d.configs, d.stat, d.var, d.cc, d.rel
        FROM j LEFT JOIN cmp_kdur d ON d.name = j.name""",
        {"bs": steps["before"], "as": steps["after"]},
    )
    return _diff_rows(df, cfg, ["name"])


def _diff_rows(df: pd.DataFrame, cfg: dict[str, float], keys: list[str]) -> dict[str, Any]:
    """Status (added/removed/faster/slower/unchanged/reshaped), ranking and totals of a matched table.

    faster/slower: the per-instance durations differ significantly (p < alpha) AND their median
    changed by at least min_effect_pct in the same direction. Instance counts and total time
    never decide it (a fixed-length capture of a slower job holds fewer instances).
    """
    if df.empty:
        return {"totals": {"before_ns": 0, "after_ns": 0, "delta_ns": 0}, "counts": {}, "rows": []}
    eff = cfg["min_effect_pct"]
    df["duration_p_value"] = _p_values(df["stat"], df["var"], df["cc"])
    df["duration_delta_pct"] = 100.0 * pd.to_numeric(df["rel"], errors="coerce")
    df["duration_configs"] = pd.to_numeric(df["configs"], errors="coerce").fillna(0).astype(int)
    sig = (df["duration_p_value"] < cfg["alpha"]).fillna(False)
    stat = pd.to_numeric(df["stat"], errors="coerce").fillna(0)
    d = df["duration_delta_pct"].fillna(0)
    df["status"] = np.select(
        [
            df["added"],
            df["removed"],
            df["duration_configs"] == 0,
            sig & (d <= -eff) & (stat < 0),
            sig & (d >= eff) & (stat > 0),
        ],
        ["added", "removed", "reshaped", "faster", "slower"],
        "unchanged",
    )
    df = df.assign(_rank=df["delta_per_step_ns"].abs())
    df = df.sort_values(["_rank"] + keys, ascending=[False] + [True] * len(keys))
    df = df.drop(columns=["_rank", "added", "removed", "configs", "stat", "var", "cc", "rel"])
    counts = {s: int((df["status"] == s).sum()) for s in STATUSES}
    totals = {"before_ns": int(df["before_ns"].sum()), "after_ns": int(df["after_ns"].sum())}
    totals["delta_ns"] = totals["after_ns"] - totals["before_ns"]
    totals["before_per_step_ns"] = float(df["before_per_step_ns"].sum())
    totals["after_per_step_ns"] = float(df["after_per_step_ns"].sum())
    totals["delta_per_step_ns"] = totals["after_per_step_ns"] - totals["before_per_step_ns"]
    return {"totals": totals, "counts": counts, "rows": records(df.reset_index(drop=True))}


def _collectives(
    con: duckdb.DuckDBPyConnection,
    cats: dict[str, str],
    steps: dict[str, int],
    cfg: dict[str, float],
    whole: dict[str, bool] | None = None,
) -> dict[str, Any]:
    """NCCL work matched by (op, bytes): kernel time over common ranks, instances, arrival skew;
    faster/slower by the NCCL kernels' per-instance durations."""
    k = (
        "SELECT op, bytes, count(*) AS n, sum(duration_ns) AS t FROM {cat}.merge_nccl_kernels "
        "WHERE {common} GROUP BY op, bytes"
    )
    c = (
        "SELECT op, bytes, count(*) AS inst, avg(start_skew_ns) AS skew, median(transfer_ns) AS xfer "
        "FROM {cat}.collectives GROUP BY op, bytes"
    )
    side = (
        "SELECT k.*, c.inst, c.skew, c.xfer FROM ({k}) k LEFT JOIN ({c}) c "
        "ON c.op = k.op AND c.bytes IS NOT DISTINCT FROM k.bytes"
    )
    q = {
        s: side.format(k=k.format(cat=cats[s], common=_common(whole, s)), c=c.format(cat=cats[s]))
        for s in SIDES
    }
    src = "SELECT op, bytes, duration_ns::DOUBLE AS v FROM {cat}.merge_nccl_kernels WHERE {common}"
    same = cats["before"] == cats["after"]
    src = {s: src.format(cat=cats[s], common=_common(whole, s)) for s in SIDES}
    _duration_tests(con, "cmp_cdur", src, ["op", "bytes"], [], same=same)
    df = _df(
        con,
        f"""
        WITH b AS MATERIALIZED ({q["before"]}), a AS ({"SELECT * FROM b" if same else q["after"]}),
        j AS (
            SELECT coalesce(b.op, a.op) AS op, coalesce(b.bytes, a.bytes) AS bytes,
                   coalesce(b.n, 0)::BIGINT AS before_kernels, coalesce(a.n, 0)::BIGINT AS after_kernels,
                   coalesce(b.inst, 0)::BIGINT AS before_instances,
                   coalesce(a.inst, 0)::BIGINT AS after_instances,
                   coalesce(b.t, 0)::BIGINT AS before_ns, coalesce(a.t, 0)::BIGINT AS after_ns,
                   b.skew AS before_avg_skew_ns, a.skew AS after_avg_skew_ns,
                   b.xfer AS before_median_transfer_ns, a.xfer AS after_median_transfer_ns,
                   b.op IS NULL AS added, a.op IS NULL AS removed
            FROM b FULL OUTER JOIN a ON a.op = b.op AND a.bytes IS NOT DISTINCT FROM b.bytes)
        SELECT j.*, after_ns - before_ns AS delta_ns,
               before_ns / $bs AS before_per_step_ns, after_ns / $as AS after_per_step_ns,
               after_ns / $as - before_ns / $bs AS delta_per_step_ns,
               d.configs, d.stat, d.var, d.cc, d.rel
        FROM j LEFT JOIN cmp_cdur d ON d.op = j.op AND d.bytes IS NOT DISTINCT FROM j.bytes""",
        {"bs": steps["before"], "as": steps["after"]},
    )
    return _diff_rows(df, cfg, ["op", "bytes"])
