"""kernel_summary / memop_summary / api_summary against NVIDIA's own `nsys stats` (2022.4) outputs.

The oracles were computed by nsys on the same SQLite files (traces/oracles/nsys-2022.4/README.md).
They pool every process of a file and the kernel report groups by (name, grid, block), so the
comparisons sum over our ranks and over the oracle's launch configurations; the per-instance
statistics (avg, median, stddev) are compared only where both sides describe the same population.
nsys rounds Avg/Med/StdDev to 0.1 ns and sizes to 0.001 MB (10^6 B).
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from conftest import nsys_traces, oracle_dir, requires_shared

TRACES = nsys_traces()
NS_TOL = 0.05 + 1e-6  # nsys prints 0.1 ns
MB_TOL = 0.0005 + 1e-9  # nsys prints 0.001 MB
NS_STATS = {"avg_ns": "Avg (ns)", "med_ns": "Med (ns)", "stddev_ns": "StdDev (ns)"}
MB_STATS = {"avg_bytes": "Avg (MB)", "med_bytes": "Med (MB)", "stddev_bytes": "StdDev (MB)"}
SUFFIX = re.compile(r"_v[0-9]{4,}$")  # the project's ABI-suffix rule (nsys 2022.4 strips exactly 4 digits)


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory):
    """One ingested workspace per trace, built on first use and shared by the module's tests."""
    from nsight_analyze.ingest.run import ingest
    from nsight_analyze.store.workspace import open_workspace

    cache: dict[Path, object] = {}

    def get(trace: Path):
        if trace not in cache:
            db = tmp_path_factory.mktemp("oracle") / "ws.duckdb"
            ingest([trace], db)
            cache[trace] = open_workspace(db)
        return cache[trace]

    yield get
    for con in cache.values():
        con.close()


def _oracle(trace: Path, report: str) -> pd.DataFrame | None:
    path = oracle_dir(trace) / f"stats_{report}.csv"
    return pd.read_csv(path) if path.exists() else None


def _ranks_with(con, table: str) -> int:
    return con.execute(f"SELECT count(DISTINCT rank) FROM {table}").fetchone()[0]


def _check_stats(mine: pd.Series, theirs: pd.Series, cols: dict[str, str], tol: float, what: str) -> None:
    for our_col, their_col in cols.items():
        assert abs(float(mine[our_col]) - float(theirs[their_col])) <= tol, (
            f"{what}: {our_col}={mine[our_col]} but nsys {their_col}={theirs[their_col]}"
        )


def _pooled(df: pd.DataFrame, key: str, count: str) -> pd.DataFrame:
    """Sum counts/totals over ranks; min of mins, max of maxes; keep per-rank rows count."""
    return df.groupby(key).agg(
        n=(count, "sum"),
        total=("total_ns", "sum"),
        lo=("min_ns", "min"),
        hi=("max_ns", "max"),
        ranks=("rank", "nunique"),
    )


@requires_shared
@pytest.mark.parametrize("trace", TRACES, ids=[oracle_dir(t).name for t in TRACES])
def test_kernel_summary_matches_gpukernsum(trace, workspaces):
    con = workspaces(trace)
    oracle = _oracle(trace, "gpukernsum")
    ours = con.execute("SELECT * FROM kernel_summary").df()
    if oracle is None:
        assert ours.empty, "nsys found no kernels in this file"
        return
    per_name = oracle.groupby("Name").agg(
        n=("Instances", "sum"),
        total=("Total Time (ns)", "sum"),
        lo=("Min (ns)", "min"),
        hi=("Max (ns)", "max"),
        rows=("Name", "size"),
    )
    pooled = _pooled(ours, "name", "instances")
    assert set(pooled.index) == set(per_name.index)
    for name, theirs in per_name.iterrows():
        mine = pooled.loc[name]
        assert (mine.n, mine.total, mine.lo, mine.hi) == (theirs.n, theirs.total, theirs.lo, theirs.hi), name
    # Full statistics where both sides describe one population: a single (grid, block) row in the
    # oracle and a single rank on our side.
    single = oracle[oracle["Name"].map(per_name["rows"]) == 1].set_index("Name")
    checked = 0
    for row in ours.itertuples(index=False):
        if row.name in single.index and pooled.loc[row.name, "ranks"] == 1:
            theirs = single.loc[row.name]
            _check_stats(
                row._asdict(),
                theirs,
                NS_STATS,
                NS_TOL,
                row.name,
            )
            if _ranks_with(con, "kernels") == 1:
                assert abs(row.pct - theirs["Time (%)"]) <= 0.05 + 1e-9, row.name
            checked += 1
    assert checked > 0 or _ranks_with(con, "kernels") > 1


@requires_shared
@pytest.mark.parametrize("trace", TRACES, ids=[oracle_dir(t).name for t in TRACES])
def test_memop_summary_matches_gpumemtimesum_and_sizesum(trace, workspaces):
    con = workspaces(trace)
    times, sizes = _oracle(trace, "gpumemtimesum"), _oracle(trace, "gpumemsizesum")
    ours = con.execute("SELECT * FROM memop_summary").df()
    if times is None:
        assert ours.empty, "nsys found no memcpy/memset in this file"
        return
    times, sizes = times.set_index("Operation"), sizes.set_index("Operation")
    pooled = _pooled(ours, "label", "instances")
    pooled_bytes = ours.groupby("label").agg(
        total_b=("total_bytes", "sum"), lo_b=("min_bytes", "min"), hi_b=("max_bytes", "max")
    )
    assert set(pooled.index) == set(times.index)
    one_rank = _ranks_with(con, "memops") == 1
    for label, theirs in times.iterrows():
        mine = pooled.loc[label]
        assert (mine.n, mine.total, mine.lo, mine.hi) == (
            theirs["Count"],
            theirs["Total Time (ns)"],
            theirs["Min (ns)"],
            theirs["Max (ns)"],
        ), label
        size = sizes.loc[label]
        assert size["Count"] == mine.n
        b = pooled_bytes.loc[label]
        for ours_b, their_mb in ((b.total_b, "Total (MB)"), (b.lo_b, "Min (MB)"), (b.hi_b, "Max (MB)")):
            assert abs(ours_b / 1e6 - size[their_mb]) <= MB_TOL, (label, their_mb)
        if one_rank:
            row = ours[ours["label"] == label].iloc[0]
            _check_stats(row, theirs, NS_STATS, NS_TOL, label)
            assert abs(row.pct - theirs["Time (%)"]) <= 0.05 + 1e-9, label
            scaled = row[["avg_bytes", "med_bytes", "stddev_bytes"]] / 1e6
            _check_stats(scaled, size, MB_STATS, MB_TOL, label)


def _skipped_api_rows(con) -> int:
    """Calls of processes that ran no GPU work: not ranks, so not in cuda_api (ingest reports them)."""
    skipped = con.execute("SELECT flatten(list(skipped)) FROM files").fetchone()[0] or []
    return sum(int(m.group(1)) for s in skipped if (m := re.match(r"cuda_api: (\d+) rows", s)))


@requires_shared
@pytest.mark.parametrize("trace", TRACES, ids=[oracle_dir(t).name for t in TRACES])
def test_api_summary_matches_cudaapisum(trace, workspaces):
    con = workspaces(trace)
    oracle = _oracle(trace, "cudaapisum")
    ours = con.execute("SELECT * FROM api_summary").df()
    if oracle is None:
        assert ours.empty, "nsys found no CUDA API calls in this file"
        return
    oracle["key"] = oracle["Name"].map(lambda n: SUFFIX.sub("", n))
    per_name = oracle.groupby("key").agg(
        n=("Num Calls", "sum"),
        total=("Total Time (ns)", "sum"),
        lo=("Min (ns)", "min"),
        hi=("Max (ns)", "max"),
        rows=("key", "size"),
    )
    pooled = _pooled(ours, "name", "calls")
    missing = _skipped_api_rows(con)
    assert set(pooled.index) <= set(per_name.index)
    assert per_name.n.sum() - pooled.n.sum() == missing
    for name, theirs in per_name.iterrows():
        if missing:
            # calls of a non-rank process are absent: ours are a subset of nsys' pooled calls
            assert name not in pooled.index or pooled.loc[name].n <= theirs.n, name
            continue
        mine = pooled.loc[name]
        assert (mine.n, mine.total, mine.lo, mine.hi) == (theirs.n, theirs.total, theirs.lo, theirs.hi), name
    if missing or _ranks_with(con, "cuda_api") != 1:
        return
    single = oracle[oracle["key"].map(per_name["rows"]) == 1].set_index("key")
    for row in ours.itertuples(index=False):
        if row.name in single.index:
            theirs = single.loc[row.name]
            _check_stats(
                row._asdict(),
                theirs,
                NS_STATS,
                NS_TOL,
                row.name,
            )
            assert abs(row.pct - theirs["Time (%)"]) <= 0.05 + 1e-9, row.name
