"""Compare two runs (before/after): what changed, whether it is real, and a CI gate.

Why one library function: the terminal, markdown, JSON (CI) and HTML outputs all render the
same `compare()` dict, so a verdict means one thing everywhere (docs/compare.md).

How: both workspaces are ATTACHed read-only to one in-memory DuckDB. Each side's expensive
views (time_partition, imbalance, rank rollup) are materialised once as temp tables; every
comparison (partition, kernels, collectives) is SQL across the two catalogs. Python only does
the statistics on the step-time samples (a few hundred numbers) with numpy: a seeded
percentile bootstrap of the difference of medians and a Mann-Whitney U test.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from .duck import offline
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
}

PARTS = (
    "compute_ns", "memory_ns", "other_ns", "comms_exposed_ns", "idle_ns",
    "launch_gap_ns", "input_stall_ns", "sync_stall_ns", "host_bound_ns", "idle_other_ns",
)
COMPANIONS = ("window_ns", "comms_total_ns", "comms_hidden_ns")
SIDES = ("before", "after")
STATUSES = ("added", "removed", "faster", "slower", "unchanged")


# ------------------------------------------------------------------------------------------------
# Statistics (numpy only: scipy is not a dependency)


def _summary(x: np.ndarray) -> dict[str, Any]:
    if len(x) == 0:
        return {"n": 0, "median_ns": None, "p10_ns": None, "p90_ns": None, "mean_ns": None}
    q10, q50, q90 = np.quantile(x, [0.1, 0.5, 0.9])
    return {"n": int(len(x)), "median_ns": float(q50), "p10_ns": float(q10), "p90_ns": float(q90),
            "mean_ns": float(x.mean())}


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
    tie = float((counts ** 3 - counts).sum())
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
    out.update({"ci_pct": None, "ci_ns": None, "p_value": None, "p_increase": None, "p_decrease": None,
                "p_within_min_effect": None})
    if min(len(x), len(y)) < int(cfg["min_samples"]) or not mb:
        return out
    rel = _bootstrap(x, y, cfg, stream)
    tail = 100.0 * (1.0 - cfg["confidence_level"]) / 2.0
    lo, hi = np.percentile(rel, [tail, 100.0 - tail])
    eff = cfg["min_effect_pct"] / 100.0
    out.update({
        "ci_pct": [float(100.0 * lo), float(100.0 * hi)],
        "ci_ns": [float(lo * mb), float(hi * mb)],
        "p_value": mann_whitney_p(x, y),
        "p_increase": float((rel > 0).mean()),
        "p_decrease": float((rel < 0).mean()),
        "p_within_min_effect": float((np.abs(rel) < eff).mean()),
    })
    return out


def verdict_of(stats: dict[str, Any], cfg: dict[str, float]) -> tuple[str, float | None, str]:
    """(verdict, confidence, why) for a step-time comparison; see docs/compare.md "Verdict"."""
    if stats["ci_pct"] is None:
        return "neutral", None, (
            f"too few step windows for a confidence interval (need {int(cfg['min_samples'])} per run)"
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
        row = compare_samples(b.loc[b["rank"] == r, "window_ns"].to_numpy(),
                              a.loc[a["rank"] == r, "window_ns"].to_numpy(), cfg, stream=1 + int(r))
        per_rank.append({"rank": int(r), **row})
    joined = pd.concat([slow_b.rename("before_ns"), slow_a.rename("after_ns")], axis=1, join="inner")
    per_step = [
        {"step": None if pd.isna(s) else int(s), "before_ns": int(v.before_ns), "after_ns": int(v.after_ns),
         "delta_ns": int(v.after_ns - v.before_ns)}
        for s, v in joined.sort_index().iterrows()
    ]
    verdict, confidence, why = verdict_of(slowest, cfg)
    samples = {"before": [int(v) for v in slow_b.to_numpy()], "after": [int(v) for v in slow_a.to_numpy()]}
    return {"slowest": slowest, "per_rank": per_rank, "per_step": per_step, "slowest_samples_ns": samples,
            "verdict": {"verdict": verdict, "confidence": confidence, "why": why}}


def gate(result: dict[str, Any], threshold_pct: float) -> dict[str, Any]:
    """CI gate: fails when the slowest rank's median step time got worse by more than PCT with
    confidence: the verdict is `regression` and the whole CI of the relative change lies above PCT.

    Why so strict: a CI gate that cries wolf gets switched off; noise-level changes (below
    min_effect_pct, or not significant) never fail it.
    """
    s = result["step_time"]["slowest"]
    cfg = result["settings"]
    if s["ci_pct"] is None:
        return {"threshold_pct": threshold_pct, "failed": False,
                "reason": "no confidence interval (too few steps): the gate cannot fail"}
    lo = s["ci_pct"][0]
    failed = lo > threshold_pct and result["verdict"]["verdict"] == "regression"
    reason = (f"slowest-rank median step time {s['delta_pct']:+.2f}%, "
              f"{100 * cfg['confidence_level']:g}% CI lower bound {lo:+.2f}% "
              f"{'>' if lo > threshold_pct else '<='} {threshold_pct:g}%, p = {s['p_value']:.3g}, "
              f"verdict {result['verdict']['verdict']}")
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
                    f"{side} input {path} does not exist (give a workspace .duckdb or a trace folder)")
            if is_workspace(path):
                out.append(path)
                continue
            db = Path(tmp) / f"{side}.duckdb"
            report = ingest([path], db)
            if not report.by_status("ok"):
                why = "; ".join(f"{o.path.name}: {o.message}" for o in report.outcomes if o.message)
                raise UserError(
                    f"nothing from {path} could be ingested for {side}" + (f" ({why})" if why else ""))
            ok = len(report.by_status("ok"))
            notes.append(f"{side}: ingested {ok} file(s) from {path} into a temporary workspace")
            out.append(db)
        yield out[0], out[1], notes


# ------------------------------------------------------------------------------------------------
# Per-side extraction (under `USE <catalog>` so the workspace's own views and macros resolve)


def _df(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> pd.DataFrame:
    return con.execute(sql, params or []).df()


def _materialise(con: duckdb.DuckDBPyConnection, cat: str, side: str) -> None:
    """Temp tables {side}_tp / _imb / _rr / _src: each expensive view evaluated once per side."""
    con.execute(f"USE {cat}")
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE {side}_tp AS SELECT * FROM time_partition")
        con.execute(f"CREATE OR REPLACE TEMP TABLE {side}_src AS "
                    "SELECT rank, min(source) AS source, count(*) AS windows FROM steps GROUP BY rank")
        try:  # the rollup's own macros over the materialised partition: no re-sweep
            con.execute(f"CREATE OR REPLACE TEMP TABLE {side}_imb AS "
                        f"SELECT * FROM merge_imbalance_of('{side}_tp')")
            con.execute(f"CREATE OR REPLACE TEMP TABLE {side}_rr AS "
                        f"SELECT * FROM merge_rank_rollup_of('{side}_tp', '{side}_imb')")
        except duckdb.Error:
            con.execute(f"CREATE OR REPLACE TEMP TABLE {side}_imb AS SELECT * FROM imbalance")
            con.execute(f"CREATE OR REPLACE TEMP TABLE {side}_rr AS SELECT * FROM rank_rollup")
    except duckdb.CatalogException as exc:
        raise UserError(f"the {side} workspace lacks a view compare needs ({str(exc).splitlines()[0]}); "
                        "re-run ingest") from None


def _findings(con: duckdb.DuckDBPyConnection, cat: str) -> tuple[list[dict[str, Any]] | None, str | None]:
    """diagnose() of one side, reduced to what a diff needs; None when diagnose is unavailable."""
    try:
        from .diagnose import diagnose
    except ImportError:
        return None, "findings: diagnose is not available in this installation"
    con.execute(f"USE {cat}")
    try:
        found = diagnose(con)
    except (duckdb.Error, UserError) as exc:
        return None, f"findings: diagnose failed ({str(exc).splitlines()[0]})"
    return [{"id": f.id, "title": f.title, "severity": f.severity, "kind": f.kind, "ranks": list(f.ranks),
             "recoverable_ns_per_step": f.recoverable_ns_per_step, "recoverable_pct": f.recoverable_pct}
            for f in found], None


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
    return {"mfu": s.get("mfu"), "hfu": s.get("hfu"), "coverage_pct": s.get("coverage_pct"),
            "windows": s.get("windows"), "note": None}


# ------------------------------------------------------------------------------------------------
# Cross-run SQL (both catalogs attached; temp tables of both sides)


def _step_windows(con: duckdb.DuckDBPyConnection, side: str) -> pd.DataFrame:
    """Per common rank, its step windows; a rank without steps has its capture as one window."""
    return _df(con, f"""
        SELECT rank, step, window_ns FROM {side}_tp t
        WHERE rank IN (SELECT rank FROM cmp_common)
          AND (step IS NOT NULL OR NOT EXISTS (
                SELECT 1 FROM {side}_tp u WHERE u.rank = t.rank AND u.step IS NOT NULL))
        ORDER BY rank, step""")


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
        delta["overlap_pct"] = (None if a["overlap_pct"] is None or b["overlap_pct"] is None
                                else a["overlap_pct"] - b["overlap_pct"])
        return {"before": b, "after": a, "delta": delta}

    rows = per.to_dict("records")
    total = triple({k: per[k].sum() for k in per.columns if k != "rank"}) if rows else None
    return {"unit": "ns per step window (mean over the rank's windows); total = sum over common ranks",
            "parts": list(PARTS), "per_rank": [{"rank": int(r["rank"]), **triple(r)} for r in rows],
            "total": total}


def _n_steps(con: duckdb.DuckDBPyConnection, side: str) -> int:
    n = con.execute(f"""SELECT max(c) FROM (SELECT count(step) AS c FROM {side}_tp
                        WHERE rank IN (SELECT rank FROM cmp_common) GROUP BY rank)""").fetchone()[0]
    return max(int(n or 0), 1)


def _kernels(con: duckdb.DuckDBPyConnection, cats: dict[str, str], steps: dict[str, int],
             eff: float) -> dict[str, Any]:
    """Kernels matched by name over the common ranks, ranked by time gained or lost per step."""
    agg = ("SELECT name, mode(category) AS category, count(*) AS n, sum(end_ns - start_ns) AS t "
           "FROM {cat}.kernels WHERE rank IN (SELECT rank FROM cmp_common) GROUP BY name")
    df = _df(con, f"""
        WITH b AS ({agg.format(cat=cats['before'])}), a AS ({agg.format(cat=cats['after'])}),
        j AS (
            SELECT coalesce(b.name, a.name) AS name, coalesce(a.category, b.category) AS category,
                   coalesce(b.n, 0)::BIGINT AS before_instances, coalesce(a.n, 0)::BIGINT AS after_instances,
                   coalesce(b.t, 0)::BIGINT AS before_ns, coalesce(a.t, 0)::BIGINT AS after_ns,
                   b.t / b.n AS before_avg_ns, a.t / a.n AS after_avg_ns,
                   b.name IS NULL AS added, a.name IS NULL AS removed
            FROM b FULL OUTER JOIN a ON a.name = b.name)
        SELECT *, after_ns - before_ns AS delta_ns,
               before_ns / $bs AS before_per_step_ns, after_ns / $as AS after_per_step_ns,
               after_ns / $as - before_ns / $bs AS delta_per_step_ns
        FROM j""", {"bs": steps["before"], "as": steps["after"]})
    return _diff_rows(df, eff, ["name"])


def _diff_rows(df: pd.DataFrame, eff: float, keys: list[str]) -> dict[str, Any]:
    """Status (added/removed/faster/slower/unchanged), ranking and totals of a matched table."""
    if df.empty:
        return {"totals": {"before_ns": 0, "after_ns": 0, "delta_ns": 0}, "counts": {}, "rows": []}
    rel = df["delta_per_step_ns"].abs() <= eff / 100.0 * df["before_per_step_ns"]
    df["status"] = np.select(
        [df["added"], df["removed"], rel | (df["delta_ns"] == 0), df["delta_per_step_ns"] < 0],
        ["added", "removed", "unchanged", "faster"], "slower")
    df = df.assign(_rank=df["delta_per_step_ns"].abs())
    df = df.sort_values(["_rank"] + keys, ascending=[False] + [True] * len(keys))
    df = df.drop(columns=["_rank", "added", "removed"])
    counts = {s: int((df["status"] == s).sum()) for s in STATUSES}
    totals = {"before_ns": int(df["before_ns"].sum()), "after_ns": int(df["after_ns"].sum())}
    totals["delta_ns"] = totals["after_ns"] - totals["before_ns"]
    totals["before_per_step_ns"] = float(df["before_per_step_ns"].sum())
    totals["after_per_step_ns"] = float(df["after_per_step_ns"].sum())
    totals["delta_per_step_ns"] = totals["after_per_step_ns"] - totals["before_per_step_ns"]
    return {"totals": totals, "counts": counts, "rows": records(df.reset_index(drop=True))}


def _collectives(con: duckdb.DuckDBPyConnection, cats: dict[str, str], steps: dict[str, int],
                 eff: float) -> dict[str, Any]:
    """NCCL work matched by (op, bytes): kernel time over common ranks, instances, arrival skew."""
    k = ("SELECT op, bytes, count(*) AS n, sum(duration_ns) AS t FROM {cat}.merge_nccl_kernels "
         "WHERE rank IN (SELECT rank FROM cmp_common) GROUP BY op, bytes")
    c = ("SELECT op, bytes, count(*) AS inst, avg(start_skew_ns) AS skew, median(transfer_ns) AS xfer "
         "FROM {cat}.collectives GROUP BY op, bytes")
    side = "SELECT k.*, c.inst, c.skew, c.xfer FROM ({k}) k LEFT JOIN ({c}) c " \
           "ON c.op = k.op AND c.bytes IS NOT DISTINCT FROM k.bytes"
    q = {s: side.format(k=k.format(cat=cats[s]), c=c.format(cat=cats[s])) for s in SIDES}
    df = _df(con, f"""
        WITH b AS ({q['before']}), a AS ({q['after']}),
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
        SELECT *, after_ns - before_ns AS delta_ns,
               before_ns / $bs AS before_per_step_ns, after_ns / $as AS after_per_step_ns,
               after_ns / $as - before_ns / $bs AS delta_per_step_ns
        FROM j""", {"bs": steps["before"], "as": steps["after"]})
    return _diff_rows(df, eff, ["op", "bytes"])


def _imbalance(con: duckdb.DuckDBPyConnection, side: str) -> dict[str, Any]:
    """The job-wide imbalance (whole capture) and straggler verdict of one run."""
    imb = _df(con, f"SELECT * FROM {side}_imb WHERE step IS NULL")
    rr = _df(con, f"SELECT rank, verdict, straggler, times_slowest, cost_ns FROM {side}_rr ORDER BY rank")
    out: dict[str, Any] = {"ratio": None, "slowest_rank": None, "balanced": None, "wait_gpu_ns": None}
    if len(imb):
        r = imb.iloc[0]
        out = {"ratio": None if pd.isna(r["ratio"]) else float(r["ratio"]),
               "slowest_rank": None if pd.isna(r["slowest_rank"]) else int(r["slowest_rank"]),
               "balanced": None if pd.isna(r["balanced"]) else bool(r["balanced"]),
               "wait_gpu_ns": None if pd.isna(r["wait_gpu_ns"]) else int(r["wait_gpu_ns"])}
    out["verdict"] = str(rr["verdict"].iloc[0]) if len(rr) else None
    out["straggler_ranks"] = [int(x) for x in rr.loc[rr["straggler"].fillna(False).astype(bool), "rank"]]
    return out


def _findings_diff(before: list[dict] | None, after: list[dict] | None) -> dict[str, Any]:
    if before is None or after is None:
        return {"available": False, "resolved": [], "new": [], "persisting": []}
    b = {f["id"]: f for f in before}
    a = {f["id"]: f for f in after}
    persisting = [{"id": i, "title": a[i]["title"], "severity_before": b[i]["severity"],
                   "severity_after": a[i]["severity"],
                   "recoverable_ns_per_step_before": b[i]["recoverable_ns_per_step"],
                   "recoverable_ns_per_step_after": a[i]["recoverable_ns_per_step"]}
                  for i in a if i in b]
    return {"available": True, "resolved": [f for i, f in b.items() if i not in a],
            "new": [f for i, f in a.items() if i not in b], "persisting": persisting}


def _suspects(result: dict[str, Any], cfg: dict[str, float]) -> list[int]:
    """Ranks to name in a verdict: new stragglers, else the rank whose compute per step changed most."""
    imb_b, imb_a = result["imbalance"]["before"], result["imbalance"]["after"]
    new = [r for r in imb_a["straggler_ranks"] if r not in imb_b["straggler_ranks"]]
    if new:
        return new
    per = (result["partition"] or {}).get("per_rank") or []
    grown = [(p["delta"]["compute_ns"] / p["before"]["compute_ns"], p["rank"])
             for p in per if p["before"]["compute_ns"]]
    if not grown:
        return []
    sign = -1 if result["verdict"]["verdict"] == "improvement" else 1
    best = max(grown, key=lambda g: sign * g[0])
    return [best[1]] if sign * best[0] * 100 >= cfg["min_effect_pct"] else []


def _reason(result: dict[str, Any]) -> str:
    v = result["verdict"]
    s = result["step_time"]["slowest"]
    if s["delta_pct"] is None:
        return f"{v['verdict']}: no step time on one side"
    text = f"{v['verdict']}: slowest-rank median step time {s['delta_pct']:+.2f}%"
    if s["ci_pct"]:
        text += (f" ({100 * result['settings']['confidence_level']:g}% CI {s['ci_pct'][0]:+.2f}%.."
                 f"{s['ci_pct'][1]:+.2f}%, p = {s['p_value']:.3g})")
    if v["verdict"] == "neutral":
        text += f"; {v['why']}"
    if v["ranks"] and v["verdict"] != "neutral":
        imb = result["imbalance"]["after"]
        names = ", ".join(map(str, v["ranks"]))
        if set(v["ranks"]) <= set(imb["straggler_ranks"]):
            text += f"; rank {names} became the straggler ({imb['verdict']})"
        else:
            text += f"; rank {names} changed most in compute per step"
    return text


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
            con.execute("SET enable_progress_bar = false")
            con.execute(f"ATTACH '{db_b.resolve()}' AS cmp_b (READ_ONLY)")
            if not same:
                con.execute(f"ATTACH '{db_a.resolve()}' AS cmp_a (READ_ONLY)")
            result = _run(con, cats, {"before": str(before), "after": str(after)}, cfg, findings,
                          model_flops_per_step)
        finally:
            con.close()
    result["notes"] = notes + result["notes"]
    if fail_on_regression_pct is not None:
        result["gate"] = gate(result, fail_on_regression_pct)
    return result


def _run(con: duckdb.DuckDBPyConnection, cats: dict[str, str], paths: dict[str, str],
         cfg: dict[str, float], with_findings: bool, model_flops: float | None) -> dict[str, Any]:
    notes: list[str] = []
    found: dict[str, list | None] = {}
    mfu: dict[str, dict] = {}
    ranks: dict[str, list[int]] = {}
    for side in SIDES:
        if side == "after" and cats["after"] == cats["before"]:  # the same workspace twice
            for t in ("tp", "src", "imb", "rr"):
                con.execute(f"CREATE OR REPLACE TEMP TABLE after_{t} AS SELECT * FROM before_{t}")
            ranks[side], found[side], mfu[side] = ranks["before"], found["before"], mfu["before"]
            continue
        _materialise(con, cats[side], side)
        ranks[side] = [int(r[0]) for r in con.execute(
            "SELECT rank FROM (SELECT rank FROM ranks UNION SELECT rank FROM kernels) ORDER BY rank"
        ).fetchall()]
        found[side], note = _findings(con, cats[side]) if with_findings else (None, None)
        if note:
            notes.append(f"{side} {note}")
        mfu[side] = _mfu(con, cats[side], model_flops)
    con.execute("USE memory")
    common = sorted(set(ranks["before"]) & set(ranks["after"]))
    if not common:
        raise UserError("the two runs have no rank in common: nothing to compare")
    con.execute("CREATE OR REPLACE TEMP TABLE cmp_common AS SELECT unnest($r::INTEGER[]) AS rank",
                {"r": common})
    only_b = sorted(set(ranks["before"]) - set(ranks["after"]))
    only_a = sorted(set(ranks["after"]) - set(ranks["before"]))
    if only_b or only_a:
        notes.append(f"rank counts differ ({len(ranks['before'])} before, {len(ranks['after'])} after): "
                     f"compared on the {len(common)} ranks both have")
    steps = {s: _n_steps(con, s) for s in SIDES}
    runs = {}
    for side in SIDES:
        src = _df(con, f"SELECT source, count(*) AS ranks FROM {side}_src GROUP BY source ORDER BY source")
        runs[side] = {"input": paths[side], "ranks": len(ranks[side]), "steps": steps[side],
                      "step_source": ", ".join(src["source"].astype(str)) or "none"}
    st = step_time_comparison(_step_windows(con, "before"), _step_windows(con, "after"), cfg)
    verdict = st.pop("verdict")
    result: dict[str, Any] = {
        "schema": SCHEMA,
        "settings": cfg,
        "runs": runs,
        "ranks": {"common": common, "only_before": only_b, "only_after": only_a},
        "verdict": {**verdict, "ranks": [], "reason": ""},
        "step_time": st,
        "partition": _partition(con),
        "imbalance": {s: _imbalance(con, s) for s in SIDES},
        "mfu": mfu,
        "kernels": _kernels(con, cats, steps, cfg["min_effect_pct"]),
        "collectives": _collectives(con, cats, steps, cfg["min_effect_pct"]),
        "findings": _findings_diff(found.get("before"), found.get("after")),
        "notes": notes,
    }
    result["verdict"]["ranks"] = _suspects(result, cfg) if verdict["verdict"] != "neutral" else []
    result["verdict"]["reason"] = _reason(result)
    return result
