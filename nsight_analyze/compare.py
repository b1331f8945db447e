"""Compare two runs (before/after): what changed, whether it is real, and a CI gate.

Why one library function: the terminal, markdown, JSON (CI) and HTML outputs all render the
same `compare()` dict, so a verdict means one thing everywhere (docs/compare.md).

How: both workspaces are ATTACHed read-only to one in-memory DuckDB. Each side's analysis
results (time_partition, steps, imbalance, rank rollup) are copied once into temp tables; every
comparison (partition, kernels, collectives, work rate) is SQL across the two catalogs, including
the per-instance work (ranks and ties of kernel durations, clipping kernels to windows). Python
only does the statistics on small inputs with numpy: on the step-time samples (a few hundred
numbers) a seeded percentile bootstrap of the difference of medians and a Mann-Whitney U test,
and the p-values of the per-kernel rank statistics SQL computed.

The verdict has a basis (docs/compare.md "Verdict"): step times when both runs have step
windows; otherwise work per unit of time (the kernels both runs launch, valued at BEFORE's mean
duration, per ns of capture window), because a fixed-length capture has no step time to compare.
Kernels are faster or slower by their per-instance durations, never by their count or total
time. Findings are matched by the cause they measure (CAUSES), not by their id.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from .duck import bound_memory, offline
from .errors import UserError
from .render import records

SCHEMA = "nsight-analyze-compare/1"

# Named, documented defaults (docs/compare.md "Statistics"); compare(settings=...) overrides them.
DEFAULTS: dict[str, float | int] = {
    "confidence_level": 0.95,  # two-sided level of the bootstrap intervals
    "bootstrap_resamples": 2000,  # resamples per interval
    "seed": 0,  # bootstrap RNG seed: same inputs, same numbers
    "alpha": 0.05,  # Mann-Whitney significance level
    "min_effect_pct": 1.0,  # smaller median changes are `neutral` whatever the p-value
    "min_samples": 3,  # steps per run needed for a confidence interval
    "rate_trim_pct": 10.0,  # without steps: work rate also on windows trimmed by up to this % per end
    "min_rate_coverage_pct": 50.0,  # without steps: matched kernels' share of kernel time needed
    "finding_change_pct": 10.0,  # finding magnitude changes smaller than this % are `unchanged`
    "resolved_max_ratio": 0.5,  # resolved: below the rule's threshold AND at most this x the before
}
TRIM_LEVELS = 5  # trims 0, 1/4, ..., 4/4 of rate_trim_pct at each end: 25 sub-windows per run

PARTS = (
    "compute_ns",
    "memory_ns",
    "other_ns",
    "comms_exposed_ns",
    "idle_ns",
    "launch_gap_ns",
    "input_stall_ns",
    "sync_stall_ns",
    "host_bound_ns",
    "idle_other_ns",
)
COMPANIONS = ("window_ns", "comms_total_ns", "comms_hidden_ns")
SIDES = ("before", "after")
STATUSES = ("added", "removed", "faster", "slower", "unchanged", "reshaped")
BASES = ("step_time", "work_rate", "none")
# Kernel launch configuration: durations are compared within one configuration (a kernel name
# often runs at several shapes, and a change in their mix is not a change of speed).
CONFIG = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")


# ------------------------------------------------------------------------------------------------
# Statistics (numpy only: scipy is not a dependency)


def _summary(x: np.ndarray) -> dict[str, Any]:
    if len(x) == 0:
        return {"n": 0, "median_ns": None, "p10_ns": None, "p90_ns": None, "mean_ns": None}
    q10, q50, q90 = np.quantile(x, [0.1, 0.5, 0.9])
    return {
        "n": int(len(x)),
        "median_ns": float(q50),
        "p10_ns": float(q10),
        "p90_ns": float(q90),
        "mean_ns": float(x.mean()),
    }


def mann_whitney_p(x: np.ndarray, y: np.ndarray) -> float | None:
    """Two-sided Mann-Whitney U p-value (normal approximation, tie and continuity corrected).

    Why this test: step times are skewed (warm-up, occasional stalls); a rank test needs no
    normality and is robust to a few outliers.
    """
    nx, ny = len(x), len(y)
    if nx == 0 or ny == 0:
        return None
    z = np.concatenate([x, y]).astype(float)
    ranks = pd.Series(z).rank(method="average").to_numpy()
    u = ranks[nx:].sum() - ny * (ny + 1) / 2.0
    n = nx + ny
    _, counts = np.unique(z, return_counts=True)
    tie = float((counts**3 - counts).sum())
    var = nx * ny / 12.0 * ((n + 1) - tie / (n * (n - 1))) if n > 1 else 0.0
    if var <= 0:
        return 1.0
    d = u - nx * ny / 2.0
    zstat = (abs(d) - 0.5) / math.sqrt(var) if abs(d) >= 0.5 else 0.0
    return float(min(1.0, math.erfc(zstat / math.sqrt(2.0))))


def _bootstrap(x: np.ndarray, y: np.ndarray, cfg: dict[str, float], stream: int) -> np.ndarray:
    """Resampled (median(y*) / median(x*) - 1): the relative change of the median, B values."""
    rng = np.random.default_rng([int(cfg["seed"]), stream])
    b = int(cfg["bootstrap_resamples"])
    mx = np.median(x[rng.integers(0, len(x), (b, len(x)))], axis=1)
    my = np.median(y[rng.integers(0, len(y), (b, len(y)))], axis=1)
    return np.where(mx > 0, my / np.where(mx > 0, mx, 1.0) - 1.0, 0.0)


def compare_samples(x: np.ndarray, y: np.ndarray, cfg: dict[str, float], stream: int = 0) -> dict[str, Any]:
    """Before/after summaries, the median difference with its bootstrap CI, and the U-test p-value."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    out: dict[str, Any] = {"before": _summary(x), "after": _summary(y)}
    mb, ma = out["before"]["median_ns"], out["after"]["median_ns"]
    out["delta_ns"] = None if mb is None or ma is None else ma - mb
    out["delta_pct"] = None if out["delta_ns"] is None or not mb else 100.0 * out["delta_ns"] / mb
    out.update(
        {
            "ci_pct": None,
            "ci_ns": None,
            "p_value": None,
            "p_increase": None,
            "p_decrease": None,
            "p_within_min_effect": None,
        }
    )
    if min(len(x), len(y)) < int(cfg["min_samples"]) or not mb:
        return out
    rel = _bootstrap(x, y, cfg, stream)
    tail = 100.0 * (1.0 - cfg["confidence_level"]) / 2.0
    lo, hi = np.percentile(rel, [tail, 100.0 - tail])
    eff = cfg["min_effect_pct"] / 100.0
    out.update(
        {
            "ci_pct": [float(100.0 * lo), float(100.0 * hi)],
            "ci_ns": [float(lo * mb), float(hi * mb)],
            "p_value": mann_whitney_p(x, y),
            "p_increase": float((rel > 0).mean()),
            "p_decrease": float((rel < 0).mean()),
            "p_within_min_effect": float((np.abs(rel) < eff).mean()),
        }
    )
    return out


def verdict_of(stats: dict[str, Any], cfg: dict[str, float]) -> tuple[str, float | None, str]:
    """(verdict, confidence, why) for a step-time comparison; see docs/compare.md "Verdict"."""
    if stats["ci_pct"] is None:
        return (
            "neutral",
            None,
            (f"too few step windows for a confidence interval (need {int(cfg['min_samples'])} per run)"),
        )
    lo, hi = stats["ci_pct"]
    p = stats["p_value"]
    d = stats["delta_pct"]
    significant = p is not None and p < cfg["alpha"]
    if significant and lo > 0 and d >= cfg["min_effect_pct"]:
        return "regression", stats["p_increase"], "slower beyond noise"
    if significant and hi < 0 and d <= -cfg["min_effect_pct"]:
        return "improvement", stats["p_decrease"], "faster beyond noise"
    if abs(d) < cfg["min_effect_pct"]:
        why = f"median change {d:+.2f}% is below min_effect_pct {cfg['min_effect_pct']:g}%"
    else:
        why = f"change not significant (p = {p:.3g}, CI {lo:+.2f}%..{hi:+.2f}%)"
    return "neutral", stats["p_within_min_effect"], why


def step_time_comparison(before: pd.DataFrame, after: pd.DataFrame, cfg: dict[str, float]) -> dict[str, Any]:
    """Step times of the slowest rank and of every rank, compared; inputs: rank, step, window_ns.

    Why the slowest rank: synchronous data-parallel training runs at its pace, so the job's step
    time is the per-step maximum over the ranks both runs have.
    """
    common = sorted(set(before["rank"]) & set(after["rank"]))
    b = before[before["rank"].isin(common)]
    a = after[after["rank"].isin(common)]
    slow_b = b.groupby("step", dropna=False)["window_ns"].max()
    slow_a = a.groupby("step", dropna=False)["window_ns"].max()
    slowest = compare_samples(slow_b.to_numpy(), slow_a.to_numpy(), cfg, stream=0)
    per_rank = []
    for r in common:  # a few ranks; each a vectorised bootstrap
        row = compare_samples(
            b.loc[b["rank"] == r, "window_ns"].to_numpy(),
            a.loc[a["rank"] == r, "window_ns"].to_numpy(),
            cfg,
            stream=1 + int(r),
        )
        per_rank.append({"rank": int(r), **row})
    joined = pd.concat([slow_b.rename("before_ns"), slow_a.rename("after_ns")], axis=1, join="inner")
    per_step = [
        {
            "step": None if pd.isna(s) else int(s),
            "before_ns": int(v.before_ns),
            "after_ns": int(v.after_ns),
            "delta_ns": int(v.after_ns - v.before_ns),
        }
        for s, v in joined.sort_index().iterrows()
    ]
    verdict, confidence, why = verdict_of(slowest, cfg)
    samples = {"before": [int(v) for v in slow_b.to_numpy()], "after": [int(v) for v in slow_a.to_numpy()]}
    return {
        "slowest": slowest,
        "per_rank": per_rank,
        "per_step": per_step,
        "slowest_samples_ns": samples,
        "verdict": {"verdict": verdict, "confidence": confidence, "why": why},
    }


def gate(result: dict[str, Any], threshold_pct: float) -> dict[str, Any]:
    """CI gate: fails when the run got worse by more than PCT with confidence, on the verdict's basis.

    step_time: the verdict is `regression` and the whole CI of the slowest rank's median step time
    change lies above PCT. work_rate: the verdict is `regression` and even the smallest loss of
    work per unit of time over the window cuts (-range_pct[1]) is above PCT.
    Why so strict: a CI gate that cries wolf gets switched off; noise-level changes (below
    min_effect_pct, or not significant) never fail it.
    """
    basis = result["verdict"].get("basis", "step_time")
    verdict = result["verdict"]["verdict"]
    if basis == "work_rate":
        wr = result["work_rate"]
        least = -wr["range_pct"][1]
        failed = least > threshold_pct and verdict == "regression"
        reason = (
            f"work per unit of time {wr['delta_pct']:+.2f}%, at least {least:+.2f}% lost however the "
            f"windows are cut {'>' if least > threshold_pct else '<='} {threshold_pct:g}%, "
            f"verdict {verdict}"
        )
        return {"threshold_pct": threshold_pct, "failed": bool(failed), "reason": reason}
    if basis == "none":
        return {
            "threshold_pct": threshold_pct,
            "failed": False,
            "reason": f"the runs are not comparable: the gate cannot fail ({result['verdict']['why']})",
        }
    s = result["step_time"]["slowest"]
    cfg = result["settings"]
    if s["ci_pct"] is None:
        return {
            "threshold_pct": threshold_pct,
            "failed": False,
            "reason": "no confidence interval (too few steps): the gate cannot fail",
        }
    lo = s["ci_pct"][0]
    failed = lo > threshold_pct and verdict == "regression"
    reason = (
        f"slowest-rank median step time {s['delta_pct']:+.2f}%, "
        f"{100 * cfg['confidence_level']:g}% CI lower bound {lo:+.2f}% "
        f"{'>' if lo > threshold_pct else '<='} {threshold_pct:g}%, p = {s['p_value']:.3g}, "
        f"verdict {verdict}"
    )
    return {"threshold_pct": threshold_pct, "failed": bool(failed), "reason": reason}


# ------------------------------------------------------------------------------------------------
# Inputs: workspaces, or traces ingested into a temporary one


def is_workspace(path: Path) -> bool:
    """A DuckDB database file (magic 'DUCK' at byte 8), not a trace to ingest."""
    if not path.is_file():
        return False
    with path.open("rb") as fh:
        return fh.read(12)[8:12] == b"DUCK"


@contextmanager
def workspaces(before: str | Path, after: str | Path) -> Iterator[tuple[Path, Path, list[str]]]:
    """Workspace paths for both inputs; trace folders/files are ingested into temporary ones."""
    from .ingest import ingest

    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="nsight-compare-") as tmp:
        out = []
        for side, given in zip(SIDES, (before, after)):
            path = Path(given)
            if not path.exists():
                raise UserError(
                    f"{side} input {path} does not exist (give a workspace .duckdb or a trace folder)"
                )
            if is_workspace(path):
                out.append(path)
                continue
            db = Path(tmp) / f"{side}.duckdb"
            report = ingest([path], db)
            if not report.by_status("ok"):
                why = "; ".join(f"{o.path.name}: {o.message}" for o in report.outcomes if o.message)
                raise UserError(
                    f"nothing from {path} could be ingested for {side}" + (f" ({why})" if why else "")
                )
            ok = len(report.by_status("ok"))
            notes.append(f"{side}: ingested {ok} file(s) from {path} into a temporary workspace")
            out.append(db)
        yield out[0], out[1], notes


# ------------------------------------------------------------------------------------------------
# Per-side extraction (under `USE <catalog>` so the workspace's own views and macros resolve)


def _df(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> pd.DataFrame:
    return con.execute(sql, params or []).df()


def _materialise(con: duckdb.DuckDBPyConnection, cat: str, side: str) -> None:
    """Temp tables {side}_tp / _src / _win / _imb / _rr: each analysis result read once per side.

    `imbalance` and `rank_rollup` are read by name when the workspace stores them as tables; while
    they are views, the same macros they are defined with run over the copied partition instead
    (imbalance = merge_imbalance_of('time_partition'), likewise the rollup), so the partition is
    not recomputed twice more.
    """
    con.execute(f"USE {cat}")
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE {side}_tp AS SELECT * FROM time_partition")
        con.execute(f"CREATE OR REPLACE TEMP TABLE {side}_steps AS SELECT * FROM steps")
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {side}_src AS SELECT rank, min(source) AS source, "
            f"count(*) AS windows FROM {side}_steps GROUP BY rank"
        )
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {side}_win AS SELECT rank, min(start_ns) AS lo, "
            f"max(end_ns) AS hi FROM {side}_steps GROUP BY rank"
        )
        stored = {
            r[0]
            for r in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()"
            ).fetchall()
        }
        if not {"imbalance", "rank_rollup"} <= stored:
            try:
                con.execute(
                    f"CREATE OR REPLACE TEMP TABLE {side}_imb AS "
                    f"SELECT * FROM merge_imbalance_of('{side}_tp')"
                )
                con.execute(
                    f"CREATE OR REPLACE TEMP TABLE {side}_rr AS "
                    f"SELECT * FROM merge_rank_rollup_of('{side}_tp', '{side}_imb')"
                )
                return
            except duckdb.Error:
                pass
        con.execute(f"CREATE OR REPLACE TEMP TABLE {side}_imb AS SELECT * FROM imbalance")
        con.execute(f"CREATE OR REPLACE TEMP TABLE {side}_rr AS SELECT * FROM rank_rollup")
    except duckdb.CatalogException as exc:
        raise UserError(
            f"the {side} workspace lacks a view compare needs ({str(exc).splitlines()[0]}); re-run ingest"
        ) from None


def _findings(con: duckdb.DuckDBPyConnection, cat: str) -> tuple[dict[str, Any] | None, str | None]:
    """diagnose() of one side, reduced to what a diff needs, with the thresholds and mean step it
    used (to place an absent finding's magnitude); None when diagnose is unavailable."""
    try:
        from .diagnose import diagnose
    except ImportError:
        return None, "findings: diagnose is not available in this installation"
    con.execute(f"USE {cat}")
    try:
        found = diagnose(con)
    except (duckdb.Error, UserError) as exc:
        return None, f"findings: diagnose failed ({str(exc).splitlines()[0]})"
    rows = [
        {
            "id": f.id,
            "title": f.title,
            "severity": f.severity,
            "kind": f.kind,
            "ranks": list(f.ranks),
            "recoverable_ns_per_step": f.recoverable_ns_per_step,
            "recoverable_pct": f.recoverable_pct,
            "metrics": dict(f.metrics),
        }
        for f in found
    ]
    job = getattr(found, "job", None) or {}
    return {
        "findings": rows,
        "thresholds": dict(getattr(found, "thresholds", None) or {}),
        "mean_step_ns": job.get("mean_step_ns"),
    }, None


def _mfu(con: duckdb.DuckDBPyConnection, cat: str, model_flops_per_step: float | None) -> dict[str, Any]:
    """MFU/HFU of one side when known (MFU needs the model FLOPs, HFU Nsight Compute data)."""
    try:
        from .mfu import hfu_mfu_summary
    except ImportError:
        return {"mfu": None, "hfu": None, "coverage_pct": None, "note": "mfu module not available"}
    con.execute(f"USE {cat}")
    try:
        s = hfu_mfu_summary(con, model_flops_per_step=model_flops_per_step)
    except (duckdb.Error, UserError, ValueError) as exc:
        return {"mfu": None, "hfu": None, "coverage_pct": None, "note": str(exc).splitlines()[0]}
    return {
        "mfu": s.get("mfu"),
        "hfu": s.get("hfu"),
        "coverage_pct": s.get("coverage_pct"),
        "windows": s.get("windows"),
        "note": None,
    }


# ------------------------------------------------------------------------------------------------
# Cross-run SQL (both catalogs attached; temp tables of both sides)


def _step_windows(con: duckdb.DuckDBPyConnection, side: str) -> pd.DataFrame:
    """Per common rank, its step windows; a rank without steps has its capture as one window."""
    return _df(
        con,
        f"""
        SELECT rank, step, window_ns FROM {side}_tp t
        WHERE rank IN (SELECT rank FROM cmp_common)
          AND (step IS NOT NULL OR NOT EXISTS (
                SELECT 1 FROM {side}_tp u WHERE u.rank = t.rank AND u.step IS NOT NULL))
        ORDER BY rank, step""",
    )


def _partition(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """Mean partition per step window, per common rank and summed over ranks, before/after/delta."""
    cols = PARTS + COMPANIONS
    for side in SIDES:
        avgs = ", ".join(f"avg({c})::DOUBLE AS {c}" for c in cols)
        con.execute(f"""
            CREATE OR REPLACE TEMP TABLE {side}_part AS
            SELECT rank, count(*) AS windows, {avgs}
            FROM {side}_tp t
            WHERE rank IN (SELECT rank FROM cmp_common)
              AND (step IS NOT NULL OR NOT EXISTS (
                    SELECT 1 FROM {side}_tp u WHERE u.rank = t.rank AND u.step IS NOT NULL))
            GROUP BY rank""")
    sel = ", ".join(f"b.{c} AS b_{c}, a.{c} AS a_{c}" for c in cols)
    per = _df(con, f"SELECT b.rank, {sel} FROM before_part b JOIN after_part a USING (rank) ORDER BY rank")

    def block(row: dict[str, Any], prefix: str) -> dict[str, Any]:
        d = {c: float(row[prefix + c]) for c in cols}
        d["overlap_pct"] = 100.0 * d["comms_hidden_ns"] / d["comms_total_ns"] if d["comms_total_ns"] else None
        return d

    def triple(row: dict[str, Any]) -> dict[str, Any]:
        b, a = block(row, "b_"), block(row, "a_")
        delta = {c: a[c] - b[c] for c in cols}
        delta["overlap_pct"] = (
            None
            if a["overlap_pct"] is None or b["overlap_pct"] is None
            else a["overlap_pct"] - b["overlap_pct"]
        )
        return {"before": b, "after": a, "delta": delta}

    rows = per.to_dict("records")
    total = triple({k: per[k].sum() for k in per.columns if k != "rank"}) if rows else None
    return {
        "unit": "ns per step window (mean over the rank's windows); total = sum over common ranks",
        "parts": list(PARTS),
        "per_rank": [{"rank": int(r["rank"]), **triple(r)} for r in rows],
        "total": total,
    }


def _n_steps(con: duckdb.DuckDBPyConnection, side: str) -> int:
    n = con.execute(f"""SELECT max(c) FROM (SELECT count(step) AS c FROM {side}_tp
                        WHERE rank IN (SELECT rank FROM cmp_common) GROUP BY rank)""").fetchone()[0]
    return max(int(n or 0), 1)


def _duration_tests(
    con: duckdb.DuckDBPyConnection, table: str, sources: dict[str, str], keys: list[str], strata: list[str]
) -> None:
    """Temp table `table`: per key, before/after per-instance durations compared within each stratum.

    `sources[side]` selects keys, strata and `v` (one instance's duration, ns). Per stratum (a
    launch configuration) present in both runs: Mann-Whitney U of AFTER against BEFORE from
    average ranks with ties, and the medians. Per key, combined over its strata (van Elteren's
    stratified test: weights 1 / (n + 1)): `stat` (weighted U - E[U]; > 0 = after longer),
    `var`, `cc` (continuity correction: half the smallest weight, so one stratum is exactly the
    plain test), `rel` (relative change of the stratum medians weighted by BEFORE's time in
    each), `configs` (strata in both runs). All per-instance work is here, in SQL.
    """
    cols = keys + strata
    part = ", ".join(cols)
    kcols = ", ".join(keys)
    # Strata are keyed by a hash (sorting and partitioning on long kernel names is what costs), and
    # the ranks come from the counts of each distinct duration, not from a window over instances.
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE {table} AS
        WITH d AS MATERIALIZED (
            SELECT hash({part}) AS sk, side, v FROM (
                SELECT 0 AS side, * FROM ({sources["before"]})
                UNION ALL SELECT 1 AS side, * FROM ({sources["after"]}))),
        strata AS (
            SELECT DISTINCT hash({part}) AS sk, {part} FROM (
                SELECT * FROM ({sources["before"]}) UNION ALL SELECT * FROM ({sources["after"]}))),
        g AS (SELECT sk, v, count(*) FILTER (WHERE side = 0) AS cx, count(*) FILTER (WHERE side = 1) AS cy
              FROM d GROUP BY sk, v),
        r AS (SELECT *, cx + cy AS c,
                     coalesce(sum(cx + cy) OVER (PARTITION BY sk ORDER BY v
                                                 ROWS UNBOUNDED PRECEDING), 0) - (cx + cy) AS below
              FROM g),
        s AS (SELECT sk, sum(cx) AS nx, sum(cy) AS ny, sum(cy * (below + (c + 1) / 2.0)) AS ra,
                     sum(c::DOUBLE * c * c - c) AS tie, sum(cx * v) AS tb
              FROM r GROUP BY sk),
        m AS (SELECT sk, median(v) FILTER (WHERE side = 0) AS mb, median(v) FILTER (WHERE side = 1) AS ma
              FROM d GROUP BY sk),
        y AS (SELECT st.*, s.nx, s.ny, s.ra, s.tie, s.tb, m.mb, m.ma, (s.nx + s.ny)::DOUBLE AS n,
                     1.0 / (s.nx + s.ny + 1) AS w, s.ra - s.ny * (s.ny + 1) / 2.0 - s.nx * s.ny / 2.0 AS du
              FROM s JOIN m USING (sk) JOIN strata st USING (sk) WHERE s.nx > 0 AND s.ny > 0)
        SELECT {kcols}, count(*) AS configs, sum(w * du) AS stat,
               sum(w * w * nx * ny / 12.0 * ((n + 1) - tie / (n * (n - 1)))) AS var, 0.5 * min(w) AS cc,
               sum(tb * (ma / mb - 1)) FILTER (WHERE mb > 0) / nullif(sum(tb) FILTER (WHERE mb > 0), 0) AS rel
        FROM y GROUP BY {kcols}""")


def _p_values(stat: pd.Series, var: pd.Series, cc: pd.Series) -> np.ndarray:
    """Two-sided normal-approximation p-values of the rank statistics (one per kernel, not per event)."""
    v = pd.to_numeric(var, errors="coerce").to_numpy(dtype=float)
    d = np.maximum(
        np.abs(pd.to_numeric(stat, errors="coerce").to_numpy(dtype=float))
        - pd.to_numeric(cc, errors="coerce").fillna(0).to_numpy(dtype=float),
        0.0,
    )
    z = np.divide(d, np.sqrt(np.where(v > 0, v, 1.0)), out=np.zeros_like(d), where=v > 0)
    p = np.array([math.erfc(x / math.sqrt(2.0)) for x in z], dtype=float)
    return np.where(np.isnan(v), np.nan, np.where(v > 0, p, 1.0))


def _kernels(
    con: duckdb.DuckDBPyConnection, cats: dict[str, str], steps: dict[str, int], cfg: dict[str, float]
) -> dict[str, Any]:
    """Kernels matched by name over the common ranks, ranked by time gained or lost per step;
    faster/slower by their per-instance durations within each launch configuration."""
    agg = (
        "SELECT name, mode(category) AS category, count(*) AS n, sum(end_ns - start_ns) AS t "
        "FROM {cat}.kernels WHERE rank IN (SELECT rank FROM cmp_common) GROUP BY name"
    )
    src = (
        f"SELECT name, {', '.join(CONFIG)}, (end_ns - start_ns)::DOUBLE AS v FROM {{cat}}.kernels "
        "WHERE rank IN (SELECT rank FROM cmp_common)"
    )
    _duration_tests(con, "cmp_kdur", {s: src.format(cat=cats[s]) for s in SIDES}, ["name"], list(CONFIG))
    df = _df(
        con,
        f"""
        WITH b AS ({agg.format(cat=cats["before"])}), a AS ({agg.format(cat=cats["after"])}),
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
    con: duckdb.DuckDBPyConnection, cats: dict[str, str], steps: dict[str, int], cfg: dict[str, float]
) -> dict[str, Any]:
    """NCCL work matched by (op, bytes): kernel time over common ranks, instances, arrival skew;
    faster/slower by the NCCL kernels' per-instance durations."""
    k = (
        "SELECT op, bytes, count(*) AS n, sum(duration_ns) AS t FROM {cat}.merge_nccl_kernels "
        "WHERE rank IN (SELECT rank FROM cmp_common) GROUP BY op, bytes"
    )
    c = (
        "SELECT op, bytes, count(*) AS inst, avg(start_skew_ns) AS skew, median(transfer_ns) AS xfer "
        "FROM {cat}.collectives GROUP BY op, bytes"
    )
    side = (
        "SELECT k.*, c.inst, c.skew, c.xfer FROM ({k}) k LEFT JOIN ({c}) c "
        "ON c.op = k.op AND c.bytes IS NOT DISTINCT FROM k.bytes"
    )
    q = {s: side.format(k=k.format(cat=cats[s]), c=c.format(cat=cats[s])) for s in SIDES}
    src = (
        "SELECT op, bytes, duration_ns::DOUBLE AS v FROM {cat}.merge_nccl_kernels "
        "WHERE rank IN (SELECT rank FROM cmp_common)"
    )
    _duration_tests(con, "cmp_cdur", {s: src.format(cat=cats[s]) for s in SIDES}, ["op", "bytes"], [])
    df = _df(
        con,
        f"""
        WITH b AS ({q["before"]}), a AS ({q["after"]}),
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


def _overlap(s: str, e: str) -> str:
    """SQL: the share of a kernel instance inside [s, e) (a zero-length one counts by its start)."""
    return (
        f"CASE WHEN end_ns > start_ns THEN greatest(least(end_ns, {e}) - greatest(start_ns, {s}), 0)"
        f"::DOUBLE / (end_ns - start_ns) ELSE (start_ns >= {s} AND start_ns < {e})::DOUBLE END"
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
    two runs (any cut of one against any cut of the other). Per-instance work is SQL.
    """
    kq = (
        "SELECT {side} AS side, rank, start_ns, end_ns, end_ns - start_ns AS dur, "
        f"hash(name, {', '.join(CONFIG)}) AS kk FROM {{cat}}.kernels "
        "WHERE rank IN (SELECT rank FROM cmp_common) AND category IS DISTINCT FROM 'comms'"
    )
    k_all = f"{kq.format(side=0, cat=cats['before'])} UNION ALL {kq.format(side=1, cat=cats['after'])}"
    trim = float(cfg["rate_trim_pct"]) / 100.0
    if not 0 <= trim < 0.5:
        raise UserError("rate_trim_pct must be at least 0 and below 50")
    cut_f = "lo + (hi - lo) * tr.f"
    cut_b = "hi - (hi - lo) * tr.f"
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE cmp_wr AS
        WITH w AS (SELECT 0 AS side, * FROM before_win WHERE rank IN (SELECT rank FROM cmp_common)
                   UNION ALL SELECT 1, * FROM after_win WHERE rank IN (SELECT rank FROM cmp_common)),
        k AS MATERIALIZED (
            SELECT k.*, w.lo, w.hi FROM ({k_all}) k JOIN w ON w.side = k.side AND w.rank = k.rank
            WHERE k.end_ns >= w.lo AND k.start_ns < w.hi),
        ref AS MATERIALIZED (SELECT kk, avg(dur) AS ref_ns FROM k WHERE side = 0 GROUP BY kk
                HAVING kk IN (SELECT kk FROM k WHERE side = 1)),
        tr AS (SELECT i, {trim} * i / {TRIM_LEVELS - 1} AS f FROM range({TRIM_LEVELS}) r(i)),
        whole AS (SELECT k.side, k.rank, sum(ref_ns * {_overlap("lo", "hi")}) AS work,
                         sum(dur * {_overlap("lo", "hi")}) AS matched_ns
                  FROM k JOIN ref USING (kk) GROUP BY k.side, k.rank),
        tot AS (SELECT side, rank, sum(dur * {_overlap("lo", "hi")}) AS kernel_ns FROM k GROUP BY side, rank),
        front AS (SELECT k.side, k.rank, tr.i, sum(ref_ns * {_overlap("lo", cut_f)}) AS cut
                  FROM k JOIN ref USING (kk) JOIN tr ON k.start_ns < {cut_f} GROUP BY k.side, k.rank, tr.i),
        back AS (SELECT k.side, k.rank, tr.i, sum(ref_ns * {_overlap(cut_b, "hi")}) AS cut
                 FROM k JOIN ref USING (kk) JOIN tr ON k.end_ns > {cut_b} GROUP BY k.side, k.rank, tr.i),
        g AS (SELECT w.side, w.rank, a.i AS fi, b.i AS bi, (w.hi - w.lo) * (1 - a.f - b.f) AS window_ns
              FROM w, tr a, tr b)
        SELECT g.*, coalesce(whole.work, 0) - coalesce(fc.cut, 0) - coalesce(bc.cut, 0) AS work_ns,
               coalesce(whole.matched_ns, 0) AS matched_ns, coalesce(tot.kernel_ns, 0) AS kernel_ns
        FROM g LEFT JOIN whole ON whole.side = g.side AND whole.rank = g.rank
        LEFT JOIN tot ON tot.side = g.side AND tot.rank = g.rank
        LEFT JOIN front fc ON fc.side = g.side AND fc.rank = g.rank AND fc.i = g.fi
        LEFT JOIN back bc ON bc.side = g.side AND bc.rank = g.rank AND bc.i = g.bi""")
    cuts = _df(
        con,
        "SELECT side, fi, bi, sum(work_ns) / nullif(sum(window_ns), 0) AS rate "
        "FROM cmp_wr GROUP BY side, fi, bi",
    )
    whole = _df(
        con,
        """SELECT side, rank, window_ns, work_ns, matched_ns, kernel_ns FROM cmp_wr
                        WHERE fi = 0 AND bi = 0 ORDER BY side, rank""",
    )
    busy = _df(
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
        w = whole[whole["side"] == i]
        window, work = float(w["window_ns"].sum()), float(w["work_ns"].sum())
        kernel, matched = float(w["kernel_ns"].sum()), float(w["matched_ns"].sum())
        bp = busy.loc[busy["side"] == i, "busy_pct"]
        out[side] = {
            "window_ns": window,
            "work_ns": work,
            "rate": work / window if window else None,
            "kernel_ns": kernel,
            "coverage_pct": 100.0 * matched / kernel if kernel else None,
            "busy_pct": None if bp.empty or pd.isna(bp.iloc[0]) else float(bp.iloc[0]),
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
    ext = cuts.groupby("side")["rate"].agg(["min", "max"])
    out["comparable"] = True
    out["delta_pct"] = 100.0 * (ra / rb - 1.0)
    out["range_pct"] = [
        100.0 * (ext.at[1, "min"] / ext.at[0, "max"] - 1.0),
        100.0 * (ext.at[1, "max"] / ext.at[0, "min"] - 1.0),
    ]
    per = whole.pivot(index="rank", columns="side", values=["work_ns", "window_ns"]).dropna()
    for r, row in per.iterrows():  # a few ranks
        b = row[("work_ns", 0)] / row[("window_ns", 0)] if row[("window_ns", 0)] else None
        a = row[("work_ns", 1)] / row[("window_ns", 1)] if row[("window_ns", 1)] else None
        out["per_rank"].append(
            {
                "rank": int(r),
                "before_rate": b,
                "after_rate": a,
                "delta_pct": 100.0 * (a / b - 1.0) if a is not None and b else None,
            }
        )
    return out


def rate_verdict(wr: dict[str, Any], cfg: dict[str, float]) -> tuple[str, float | None, str]:
    """(verdict, confidence, why) on work per unit of time; see docs/compare.md "Verdict"."""
    if not wr["comparable"]:
        return "neutral", None, f"not comparable: {wr['why']}"
    d = wr["delta_pct"]
    lo, hi = wr["range_pct"]
    eff = cfg["min_effect_pct"]
    if d <= -eff and hi < 0:
        return "regression", None, "less work per unit of time, however the windows are cut"
    if d >= eff and lo > 0:
        return "improvement", None, "more work per unit of time, however the windows are cut"
    if abs(d) < eff:
        return "neutral", None, f"work-rate change {d:+.2f}% is below min_effect_pct {eff:g}%"
    return (
        "neutral",
        None,
        (f"work-rate change {d:+.2f}% is within what cutting the windows changes ({lo:+.2f}%..{hi:+.2f}%)"),
    )


def _imbalance(con: duckdb.DuckDBPyConnection, side: str) -> dict[str, Any]:
    """The job-wide imbalance (whole capture) and straggler verdict of one run."""
    imb = _df(con, f"SELECT * FROM {side}_imb WHERE step IS NULL")
    rr = _df(con, f"SELECT rank, verdict, straggler, times_slowest, cost_ns FROM {side}_rr ORDER BY rank")
    out: dict[str, Any] = {"ratio": None, "slowest_rank": None, "balanced": None, "wait_gpu_ns": None}
    if len(imb):
        r = imb.iloc[0]
        out = {
            "ratio": None if pd.isna(r["ratio"]) else float(r["ratio"]),
            "slowest_rank": None if pd.isna(r["slowest_rank"]) else int(r["slowest_rank"]),
            "balanced": None if pd.isna(r["balanced"]) else bool(r["balanced"]),
            "wait_gpu_ns": None if pd.isna(r["wait_gpu_ns"]) else int(r["wait_gpu_ns"]),
        }
    out["verdict"] = str(rr["verdict"].iloc[0]) if len(rr) else None
    out["straggler_ranks"] = [int(x) for x in rr.loc[rr["straggler"].fillna(False).astype(bool), "rank"]]
    return out


@dataclass(frozen=True)
class Cause:
    """What a family of findings measures, so that the same problem is matched across runs.

    ids: the diagnose finding ids that measure it (launch-bound and host-bound are one rule's two
    readings of the same idle time, chosen by a 50 % cut-off). magnitude: `recoverable` (the
    finding's recoverable_ns_per_step) or a key of its metrics; `measure`, when set, is computed by
    compare on both runs whether or not the finding was reported (the same definition as the
    rule's), so an absent finding still has a magnitude. threshold: the diagnose threshold the
    rule reports at; `of_step` = it is a % of the mean step (magnitudes in ns per step).
    """

    key: str
    ids: tuple[str, ...]
    title: str
    unit: str  # ns_per_step | pct | ns
    magnitude: str = "recoverable"
    threshold: str | None = None
    of_step: bool = True
    measure: str | None = None


# The cause mapping (docs/compare.md "Findings"). diagnose.py and rules/ own the findings; compare
# owns which of them measure the same thing.
CAUSES: tuple[Cause, ...] = (
    Cause(
        "idle-host",
        ("launch-bound", "host-bound"),
        "GPU idle between operations while the host launches or runs other code "
        "(launch gaps + host-bound idle)",
        "ns_per_step",
        threshold="launch_min_pct",
        measure="launch_gap_ns + host_bound_ns",
    ),
    Cause(
        "input-stall",
        ("input-stall",),
        "GPU idle waiting on the input pipeline",
        "ns_per_step",
        threshold="input_stall_min_pct",
        measure="input_stall_ns",
    ),
    Cause(
        "sync-stall",
        ("excessive-sync",),
        "GPU idle while the host is blocked in a synchronising call",
        "ns_per_step",
        threshold="sync_stall_min_pct",
        measure="sync_stall_ns",
    ),
    Cause(
        "exposed-comm",
        ("exposed-comm",),
        "Exposed communication that overlap could hide",
        "ns_per_step",
        threshold="exposed_comm_min_pct",
    ),
    Cause(
        "load-imbalance",
        ("load-imbalance",),
        "Load imbalance: the slowest rank's extra compute",
        "ns_per_step",
        threshold="imbalance_min_pct",
    ),
    Cause(
        "low-occupancy",
        ("low-occupancy",),
        "Kernels with fewer blocks than SMs",
        "ns_per_step",
        threshold="low_occupancy_min_pct",
    ),
    Cause(
        "host-device-copies",
        ("host-device-copies",),
        "Host<->device copies",
        "ns_per_step",
        threshold="copy_min_pct",
    ),
    Cause("gpu-starvation", ("gpu-starvation",), "Long GPU idle gaps (starvation)", "ns_per_step"),
    Cause("gpu-low-utilisation", ("gpu-low-utilisation",), "Low GPU utilisation windows", "ns_per_step"),
    Cause(
        "memory-bound",
        ("memory-bound",),
        "Memory-category share of busy GPU time",
        "pct",
        magnitude="memory_pct_of_busy",
        threshold="memory_bound_min_pct",
        of_step=False,
        measure="memory_share",
    ),
    Cause(
        "dominant-kernel",
        ("dominant-kernel",),
        "The largest kernel's share of kernel time",
        "pct",
        magnitude="pct_of_kernel_time",
        threshold="dominant_kernel_pct",
        of_step=False,
        measure="dominant_share",
    ),
    Cause(
        "cuda-graphs",
        ("cuda-graphs",),
        "Kernel time launched from CUDA graphs",
        "pct",
        magnitude="graph_time_pct",
        threshold="graph_min_pct",
        of_step=False,
    ),
    Cause(
        "clock-skew",
        ("clock-skew",),
        "Clock correction between hosts",
        "ns",
        magnitude="max_correction_ns",
        threshold="clock_skew_min_us",
        of_step=False,
    ),
    Cause(
        "compute-efficiency",
        ("compute-efficiency",),
        "Hardware FLOPs utilisation (HFU)",
        "fraction",
        magnitude="hfu",
    ),
)
CAUSE_OF = {i: c for c in CAUSES for i in c.ids}
CHANGES = ("worse", "new", "improved", "resolved", "unchanged", "unmeasured")


def cause_of(finding_id: str) -> Cause:
    """The cause a finding id measures; an id compare does not know is its own cause."""
    return CAUSE_OF.get(finding_id) or Cause(finding_id, (finding_id,), finding_id, "ns_per_step")


def _measures(con: duckdb.DuckDBPyConnection, side: str, cat: str) -> dict[str, float | None]:
    """Each side's own value of every cause with a `measure`, whether or not diagnose reported it.

    Same definitions as the rules (all ranks, diagnose's windows: the steps, else the capture):
    idle causes = sum over steps of the worst rank's value / steps (diag_step_causes); memory
    share = 100 x memory / busy time (rules/kernels.py); dominant share = the largest kernel
    name's share of kernel_summary time.
    """
    w = (
        f"SELECT * FROM {side}_tp WHERE CASE WHEN EXISTS (SELECT 1 FROM {side}_tp WHERE step IS NOT "
        "NULL) THEN step IS NOT NULL ELSE step IS NULL END"
    )
    idle = [c for c in CAUSES if c.measure and c.unit == "ns_per_step"]
    per_step = ", ".join(f"max({c.measure}) AS m{i}" for i, c in enumerate(idle))
    avgs = ", ".join(f"sum(m{i}) / count(*) AS m{i}" for i in range(len(idle)))
    row = con.execute(f"SELECT {avgs} FROM (SELECT step, {per_step} FROM ({w}) GROUP BY step)").fetchone()
    out: dict[str, float | None] = {
        c.key: (None if v is None else float(round(v))) for c, v in zip(idle, row or [None] * len(idle))
    }
    mem = con.execute(
        f"SELECT 100.0 * sum(memory_ns) / nullif(sum(window_ns - idle_ns), 0) FROM ({w})"
    ).fetchone()[0]
    out["memory-bound"] = None if mem is None else float(mem)
    try:
        dom = con.execute(
            f"""SELECT 100.0 * max(t) / nullif(sum(t), 0) FROM (
                    SELECT name, sum(total_ns) AS t FROM {cat}.kernel_summary GROUP BY name)"""
        ).fetchone()[0]
        out["dominant-kernel"] = None if dom is None else float(dom)
    except duckdb.Error:
        out["dominant-kernel"] = None
    return out


def _threshold(cause: Cause, diag: dict[str, Any] | None) -> float | None:
    """The rule's reporting threshold in the cause's unit for one run (None when unknown)."""
    if cause.threshold is None or not diag:
        return None
    th = diag["thresholds"].get(cause.threshold)
    if th is None:
        return None
    if cause.key == "clock-skew":
        return float(th) * 1000.0
    if cause.of_step:
        step = diag.get("mean_step_ns")
        return float(th) / 100.0 * float(step) if step else None
    return float(th)


def _magnitude(
    cause: Cause, finding: dict[str, Any] | None, measured: dict[str, float | None]
) -> float | None:
    if cause.measure and cause.key in measured and measured[cause.key] is not None:
        return measured[cause.key]
    if finding is None:
        return None
    v = (
        finding["recoverable_ns_per_step"]
        if cause.magnitude == "recoverable"
        else finding.get("metrics", {}).get(cause.magnitude)
    )
    try:
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
    except (TypeError, ValueError):
        return None


def _below(m: float, t: float) -> bool:
    return m < t or m <= 0


def _change(
    cause: Cause,
    mb: float | None,
    ma: float | None,
    tb: float | None,
    ta: float | None,
    present_b: bool,
    present_a: bool,
    cfg: dict[str, float],
) -> tuple[str, str]:
    """(status, why) of one cause; docs/compare.md "Findings"."""
    band, ratio = cfg["finding_change_pct"] / 100.0, cfg["resolved_max_ratio"]
    higher_better = cause.unit == "fraction"

    def by_size(b: float, a: float) -> tuple[str, str]:
        if b == a or (b and abs(a - b) <= band * abs(b)):
            return "unchanged", f"magnitude within {cfg['finding_change_pct']:g} % of before"
        grew = a > b
        status = "worse" if grew != higher_better else "improved"
        return status, "magnitude grew" if grew else "magnitude fell"

    if mb is not None and ma is not None:
        if present_b and not present_a and ta is not None and _below(ma, ta) and ma <= ratio * mb:
            return "resolved", f"below the rule's threshold and at most {ratio:g} x before"
        if present_a and not present_b and tb is not None and _below(mb, tb) and mb <= ratio * ma:
            return "new", f"below the rule's threshold before and at most {ratio:g} x after"
        st, why = by_size(mb, ma)
        if present_b != present_a:
            why += (
                " (the finding " + ("is no longer" if present_b else "is now") + " reported: a "
                "threshold crossing, not a change of cause)"
            )
        return st, why
    if present_b and not present_a and mb is not None and ta is not None:
        if ta <= ratio * mb:  # absent: below ta, so at most ratio x before
            return "resolved", f"not reported after, so below its threshold ({ta:.4g}) <= {ratio:g} x before"
        if ta < (1 - band) * mb:
            return "improved", f"not reported after, so below its threshold ({ta:.4g})"
    if present_a and not present_b and ma is not None and tb is not None:
        if tb <= ratio * ma:
            return "new", f"not reported before, so below its threshold ({tb:.4g}) <= {ratio:g} x after"
        if tb < (1 - band) * ma:
            return "worse", f"not reported before, so below its threshold ({tb:.4g})"
    return "unmeasured", "no magnitude to compare on " + (
        "both runs" if present_b == present_a else "the run without the finding"
    )


def _findings_diff(
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    measured: dict[str, dict[str, float | None]],
    cfg: dict[str, float],
) -> dict[str, Any]:
    """Findings matched by cause (CAUSES), with magnitudes before/after and a change status."""
    if before is None or after is None:
        return {"available": False, "resolved": [], "new": [], "persisting": [], "causes": []}
    sides = {"before": before, "after": after}
    by_cause: dict[str, dict[str, list[dict]]] = {}
    for side, diag in sides.items():
        for f in diag["findings"]:
            by_cause.setdefault(cause_of(f["id"]).key, {"before": [], "after": []})[side].append(f)
    public = ("id", "title", "severity", "kind", "ranks", "recoverable_ns_per_step", "recoverable_pct")
    causes, resolved, new, persisting = [], [], [], []
    for key, fs in by_cause.items():
        cause = cause_of((fs["before"] or fs["after"])[0]["id"])
        fb, fa = (fs["before"] or [None])[0], (fs["after"] or [None])[0]
        mb, ma = _magnitude(cause, fb, measured["before"]), _magnitude(cause, fa, measured["after"])
        tb, ta = _threshold(cause, before), _threshold(cause, after)
        status, why = _change(cause, mb, ma, tb, ta, fb is not None, fa is not None, cfg)
        delta = None if mb is None or ma is None else ma - mb
        entry = {
            "cause": key,
            "title": cause.title,
            "status": status,
            "why": why,
            "ids_before": [f["id"] for f in fs["before"]],
            "ids_after": [f["id"] for f in fs["after"]],
            "unit": cause.unit,
            "magnitude_before": mb,
            "magnitude_after": ma,
            "delta": delta,
            "delta_pct": 100.0 * delta / mb if delta is not None and mb else None,
            "threshold_before": tb,
            "threshold_after": ta,
            "severity_before": fb["severity"] if fb else None,
            "severity_after": fa["severity"] if fa else None,
        }
        causes.append(entry)
        if status == "resolved":
            resolved += [{k: f[k] for k in public} | {"cause": key} for f in fs["before"]]
        elif status == "new":
            new += [{k: f[k] for k in public} | {"cause": key} for f in fs["after"]]
        else:
            ref = fa or fb
            persisting.append(
                {
                    "id": ref["id"],
                    "title": ref["title"],
                    "cause": key,
                    "status": status,
                    "ids_before": entry["ids_before"],
                    "ids_after": entry["ids_after"],
                    "severity_before": entry["severity_before"],
                    "severity_after": entry["severity_after"],
                    "recoverable_ns_per_step_before": fb["recoverable_ns_per_step"] if fb else None,
                    "recoverable_ns_per_step_after": fa["recoverable_ns_per_step"] if fa else None,
                    "magnitude_before": mb,
                    "magnitude_after": ma,
                }
            )
    order = {s: i for i, s in enumerate(CHANGES)}
    causes.sort(key=lambda c: (order[c["status"]], -abs(c["delta_pct"] or 0.0), c["cause"]))
    return {"available": True, "resolved": resolved, "new": new, "persisting": persisting, "causes": causes}


def _suspects(result: dict[str, Any], cfg: dict[str, float]) -> list[int]:
    """Ranks to name in a verdict: new stragglers, else (step basis) the rank whose compute per step
    changed most, else (work-rate basis) the rank whose work rate changed most."""
    imb_b, imb_a = result["imbalance"]["before"], result["imbalance"]["after"]
    new = [r for r in imb_a["straggler_ranks"] if r not in imb_b["straggler_ranks"]]
    if new:
        return new
    sign = -1 if result["verdict"]["verdict"] == "improvement" else 1
    if result["verdict"]["basis"] == "work_rate":
        rates = [
            (p["delta_pct"], p["rank"]) for p in result["work_rate"]["per_rank"] if p["delta_pct"] is not None
        ]
        if len(rates) < 2:
            return []
        best = min(rates, key=lambda g: sign * g[0])  # a regression is a fall of the rate
        others = [d for d, r in rates if r != best[1]]
        return [best[1]] if abs(best[0] - sum(others) / len(others)) >= cfg["min_effect_pct"] else []
    per = (result["partition"] or {}).get("per_rank") or []
    grown = [
        (p["delta"]["compute_ns"] / p["before"]["compute_ns"], p["rank"])
        for p in per
        if p["before"]["compute_ns"]
    ]
    if not grown:
        return []
    best = max(grown, key=lambda g: sign * g[0])
    return [best[1]] if sign * best[0] * 100 >= cfg["min_effect_pct"] else []


def _reason(result: dict[str, Any]) -> str:
    v = result["verdict"]
    if v["basis"] == "step_time":
        s = result["step_time"]["slowest"]
        if s["delta_pct"] is None:
            return f"{v['verdict']}: no step time on one side"
        text = f"{v['verdict']}: slowest-rank median step time {s['delta_pct']:+.2f}%"
        if s["ci_pct"]:
            text += (
                f" ({100 * result['settings']['confidence_level']:g}% CI {s['ci_pct'][0]:+.2f}%.."
                f"{s['ci_pct'][1]:+.2f}%, p = {s['p_value']:.3g})"
            )
    else:
        wr = result["work_rate"]
        if wr["comparable"]:
            lo, hi = wr["range_pct"]
            text = (
                f"{v['verdict']}: work per unit of time {wr['delta_pct']:+.2f}% "
                f"({lo:+.2f}%..{hi:+.2f}% however the windows are cut; {v['basis_why']})"
            )
        else:
            text = f"{v['verdict']}: {v['basis_why']}"
    if v["verdict"] == "neutral":
        text += f"; {v['why']}"
    if v["ranks"] and v["verdict"] != "neutral":
        imb = result["imbalance"]["after"]
        names = ", ".join(map(str, v["ranks"]))
        if set(v["ranks"]) <= set(imb["straggler_ranks"]):
            text += f"; rank {names} became the straggler ({imb['verdict']})"
        elif v["basis"] == "work_rate":
            text += f"; rank {names} changed most in work per unit of time"
        else:
            text += f"; rank {names} changed most in compute per step"
    return text


def _basis(has_steps: dict[str, bool], wr: dict[str, Any]) -> tuple[str, str]:
    """(basis, why): step times when both runs have step windows, else work per unit of time."""
    if has_steps["before"] and has_steps["after"]:
        return "step_time", "both runs have step windows"
    which = (
        "neither run has"
        if not (has_steps["before"] or has_steps["after"])
        else ("AFTER has" if has_steps["before"] else "BEFORE has") + " no"
    )
    why = f"{which} step windows, so step times are not comparable"
    if not wr["comparable"]:
        return "none", f"{why}, and work per unit of time is not comparable either: {wr['why']}"
    return "work_rate", f"{why}: judged by kernel work per ns of window"


# ------------------------------------------------------------------------------------------------
# Public API


def resolve_settings(overrides: dict[str, Any] | None) -> dict[str, float]:
    cfg = dict(DEFAULTS)
    for k, v in (overrides or {}).items():
        if k not in DEFAULTS:
            raise UserError(f"unknown compare setting {k!r}; known: {', '.join(sorted(DEFAULTS))}")
        cfg[k] = int(v) if isinstance(DEFAULTS[k], int) else float(v)
    if not 0 < cfg["confidence_level"] < 1:
        raise UserError("confidence_level must be between 0 and 1")
    return cfg


def _refresh(path: Path) -> str | None:
    """Bring the workspace's stored views up to date (they are what ATTACH sees); a note if we cannot."""
    from .workspace import open_workspace

    try:
        open_workspace(path, read_only=True).close()
    except UserError as exc:
        return f"{path}: views not refreshed ({exc}); results use the views stored in the file"
    return None


def compare(
    before: str | Path,
    after: str | Path,
    *,
    settings: dict[str, Any] | None = None,
    findings: bool = True,
    model_flops_per_step: float | None = None,
    fail_on_regression_pct: float | None = None,
) -> dict[str, Any]:
    """Compare two runs (workspaces or trace folders/files); the stable JSON of docs/compare.md."""
    cfg = resolve_settings(settings)
    with workspaces(before, after) as (db_b, db_a, notes):
        for db in sorted({db_b.resolve(), db_a.resolve()}):
            note = _refresh(db)
            if note:
                notes.append(note)
        same = db_b.resolve() == db_a.resolve()
        cats = {"before": "cmp_b", "after": "cmp_b" if same else "cmp_a"}
        con = offline(duckdb.connect())
        try:
            bound_memory(con)  # the same cap as every analysis connection: spill, never take the machine
            con.execute("SET enable_progress_bar = false")
            con.execute(f"ATTACH '{db_b.resolve()}' AS cmp_b (READ_ONLY)")
            if not same:
                con.execute(f"ATTACH '{db_a.resolve()}' AS cmp_a (READ_ONLY)")
            result = _run(
                con, cats, {"before": str(before), "after": str(after)}, cfg, findings, model_flops_per_step
            )
        finally:
            con.close()
    result["notes"] = notes + result["notes"]
    if fail_on_regression_pct is not None:
        result["gate"] = gate(result, fail_on_regression_pct)
    return result


def _run(
    con: duckdb.DuckDBPyConnection,
    cats: dict[str, str],
    paths: dict[str, str],
    cfg: dict[str, float],
    with_findings: bool,
    model_flops: float | None,
) -> dict[str, Any]:
    notes: list[str] = []
    found: dict[str, list | None] = {}
    mfu: dict[str, dict] = {}
    ranks: dict[str, list[int]] = {}
    for side in SIDES:
        if side == "after" and cats["after"] == cats["before"]:  # the same workspace twice
            for t in ("tp", "steps", "src", "win", "imb", "rr"):
                con.execute(f"CREATE OR REPLACE TEMP TABLE after_{t} AS SELECT * FROM before_{t}")
            ranks[side], found[side], mfu[side] = ranks["before"], found["before"], mfu["before"]
            continue
        _materialise(con, cats[side], side)
        ranks[side] = [
            int(r[0])
            for r in con.execute(
                "SELECT rank FROM (SELECT rank FROM ranks UNION SELECT rank FROM kernels) ORDER BY rank"
            ).fetchall()
        ]
        found[side], note = _findings(con, cats[side]) if with_findings else (None, None)
        if note:
            notes.append(f"{side} {note}")
        mfu[side] = _mfu(con, cats[side], model_flops)
    con.execute("USE memory")
    common = sorted(set(ranks["before"]) & set(ranks["after"]))
    if not common:
        raise UserError("the two runs have no rank in common: nothing to compare")
    con.execute(
        "CREATE OR REPLACE TEMP TABLE cmp_common AS SELECT unnest($r::INTEGER[]) AS rank", {"r": common}
    )
    only_b = sorted(set(ranks["before"]) - set(ranks["after"]))
    only_a = sorted(set(ranks["after"]) - set(ranks["before"]))
    if only_b or only_a:
        notes.append(
            f"rank counts differ ({len(ranks['before'])} before, {len(ranks['after'])} after): "
            f"compared on the {len(common)} ranks both have"
        )
    steps = {s: _n_steps(con, s) for s in SIDES}
    has_steps = {
        s: bool(
            con.execute(
                f"SELECT count(*) FROM {s}_tp WHERE step IS NOT NULL "
                "AND rank IN (SELECT rank FROM cmp_common)"
            ).fetchone()[0]
        )
        for s in SIDES
    }
    runs = {}
    for side in SIDES:
        src = _df(con, f"SELECT source, count(*) AS ranks FROM {side}_src GROUP BY source ORDER BY source")
        runs[side] = {
            "input": paths[side],
            "ranks": len(ranks[side]),
            "steps": steps[side],
            "step_source": ", ".join(src["source"].astype(str)) or "none",
            "has_steps": has_steps[side],
        }
    st = step_time_comparison(_step_windows(con, "before"), _step_windows(con, "after"), cfg)
    step_verdict = st.pop("verdict")
    wr = _work_rate(con, cats, cfg)
    basis, basis_why = _basis(has_steps, wr)
    if basis == "step_time":
        verdict, confidence, why = step_verdict["verdict"], step_verdict["confidence"], step_verdict["why"]
    else:
        verdict, confidence, why = rate_verdict(wr, cfg)
    measured = {s: _measures(con, s, cats[s]) for s in SIDES} if with_findings else {}
    result: dict[str, Any] = {
        "schema": SCHEMA,
        "settings": cfg,
        "runs": runs,
        "ranks": {"common": common, "only_before": only_b, "only_after": only_a},
        "verdict": {
            "verdict": verdict,
            "confidence": confidence,
            "why": why,
            "ranks": [],
            "reason": "",
            "basis": basis,
            "basis_why": basis_why,
            "comparable": basis != "none",
        },
        "step_time": st,
        "work_rate": wr,
        "partition": _partition(con),
        "imbalance": {s: _imbalance(con, s) for s in SIDES},
        "mfu": mfu,
        "kernels": _kernels(con, cats, steps, cfg),
        "collectives": _collectives(con, cats, steps, cfg),
        "findings": _findings_diff(found.get("before"), found.get("after"), measured, cfg),
        "notes": notes,
    }
    if basis != "step_time" and (has_steps["before"] or has_steps["after"]):
        notes.append(f"verdict on work per unit of time: {basis_why}")
    result["verdict"]["ranks"] = _suspects(result, cfg) if verdict != "neutral" else []
    result["verdict"]["reason"] = _reason(result)
    return result
