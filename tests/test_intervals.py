"""Interval algebra macros (queries/interval_*.sql) against a brute-force reference.

Why: every time measure of the tool is a union length; an off-by-one at touching, nested,
identical or zero-length intervals silently corrupts every partition. The reference marks each
integer time unit [t, t+1) covered or not, which needs no cleverness to be right.
"""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nsight_analyze.store.workspace import open_workspace

T_MAX = 40


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    con = open_workspace(tmp_path_factory.mktemp("iv") / "w.duckdb")
    yield con
    con.close()


def covered(intervals: list[tuple[int, int, int]], key: int) -> set[int]:
    """Time units [t, t+1) covered by the intervals of `key`."""
    return {t for k, s, e in intervals if k == key for t in range(s, e)}


def runs(units: set[int]) -> list[tuple[int, int]]:
    """Maximal runs of consecutive units as half-open intervals (touching runs merge)."""
    out: list[tuple[int, int]] = []
    for t in sorted(units):
        if out and out[-1][1] == t:
            out[-1] = (out[-1][0], t + 1)
        else:
            out.append((t, t + 1))
    return out


def load(con, name: str, intervals: list[tuple[int, int, int]]) -> None:
    df = pd.DataFrame(intervals or [], columns=["k", "start_ns", "end_ns"]).astype("int64")
    con.register("iv_df", df)
    con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM iv_df")
    con.unregister("iv_df")


def result(con, sql: str) -> dict[int, list[tuple[int, int]]]:
    out: dict[int, list[tuple[int, int]]] = {}
    for k, s, e in con.execute(sql + " ORDER BY k, start_ns").fetchall():
        out.setdefault(k, []).append((s, e))
    return out


interval = st.tuples(st.integers(0, 2), st.integers(0, T_MAX), st.integers(0, 12)).map(
    lambda t: (t[0], t[1], t[1] + t[2] if t[2] != 12 else t[1])  # 12 -> zero-length
)
interval_sets = st.lists(interval, max_size=12)

NESTED = [(0, 0, 10), (0, 2, 5), (0, 3, 4)]
TOUCHING = [(0, 0, 5), (0, 5, 9), (0, 9, 9), (1, 3, 3)]
IDENTICAL = [(0, 4, 8), (0, 4, 8), (0, 4, 8)]
ZERO = [(0, 5, 5), (1, 0, 0), (1, 7, 7)]

PROPERTY = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@PROPERTY
@given(a=interval_sets)
@example(a=NESTED)
@example(a=TOUCHING)
@example(a=IDENTICAL)
@example(a=ZERO)
@example(a=[])
def test_union_matches_reference(con, a):
    load(con, "ia", a)
    got = result(con, "SELECT * FROM interval_union('ia')")
    want = {k: runs(covered(a, k)) for k in {0, 1, 2} if covered(a, k)}
    assert got == want


@PROPERTY
@given(a=interval_sets, b=interval_sets)
@example(a=NESTED, b=TOUCHING)
@example(a=TOUCHING, b=TOUCHING)
@example(a=IDENTICAL, b=[(0, 8, 10), (0, 0, 4)])
@example(a=ZERO, b=ZERO)
@example(a=[(0, 0, 5)], b=[])
def test_intersect_and_difference_match_reference(con, a, b):
    load(con, "ia", a)
    load(con, "ib", b)
    keys = {0, 1, 2}
    inter = {k: runs(covered(a, k) & covered(b, k)) for k in keys}
    diff = {k: runs(covered(a, k) - covered(b, k)) for k in keys}
    got_inter = result(con, "SELECT * FROM interval_intersect('ia', 'ib')")
    got_diff = result(con, "SELECT * FROM interval_difference('ia', 'ib')")
    assert got_inter == {k: v for k, v in inter.items() if v}
    assert got_diff == {k: v for k, v in diff.items() if v}


@PROPERTY
@given(a=interval_sets, b=interval_sets)
def test_sweep_counts_cover_every_unit(con, a, b):
    """interval_sweep's counts equal the number of covering intervals, unit by unit."""
    load(con, "ia", a)
    load(con, "ib", b)
    rows = con.execute("SELECT k, start_ns, end_ns, in_a, in_b FROM interval_sweep('ia', 'ib')").fetchall()
    seen: dict[tuple[int, int], tuple[int, int]] = {}
    for k, s, e, na, nb in rows:
        assert e > s
        for t in range(s, e):
            assert (k, t) not in seen, "segments overlap"
            seen[(k, t)] = (na, nb)
    for (k, t), (na, nb) in seen.items():
        assert na == sum(1 for kk, s, e in a if kk == k and s <= t < e)
        assert nb == sum(1 for kk, s, e in b if kk == k and s <= t < e)
    for k, s, e in a + b:  # every covered unit has a segment
        for t in range(s, e):
            assert (k, t) in seen


def test_struct_and_null_keys(con):
    """Several partition columns are one struct key; a NULL key is a partition of its own."""
    con.execute(
        "CREATE OR REPLACE TEMP TABLE ks AS SELECT * FROM (VALUES "
        "({'rank': 0, 'stream': 7}, 0, 10), ({'rank': 0, 'stream': 7}, 5, 20), "
        "({'rank': 0, 'stream': 8}, 5, 6), (NULL, 1, 2), (NULL, 2, 3)) v(k, start_ns, end_ns)"
    )
    rows = con.execute("SELECT k.stream, start_ns, end_ns FROM interval_union('ks') ORDER BY ALL").fetchall()
    assert rows == [(7, 0, 20), (8, 5, 6), (None, 1, 3)]


_BIGINT = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_RANKED = st.lists(st.tuples(st.integers(0, 3), _BIGINT, _BIGINT), max_size=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=_RANKED, b=_RANKED)
@example(a=[(0, -(2**63), 2**63 - 1)], b=[(1, -(2**63), 2**63 - 1)])  # the extremes of two ranks
def test_rank_time_overlap_join_pairs_exactly_the_same_rank_overlaps(con, a, b):
    """queries/timeline/_rank_time.sql: "same rank and overlapping" written as two inequalities between
    _rank_time values (an inequality join) pairs the same rows as the plain predicate (the
    reference, computed here in Python), for any BIGINT times and several ranks."""
    a = [(k, min(s, e), max(s, e)) for k, s, e in a]
    b = [(k, min(s, e), max(s, e)) for k, s, e in b]
    want = sorted((i, j) for i, (ka, sa, ea) in enumerate(a) for j, (kb, sb, eb) in enumerate(b)
                  if ka == kb and sa < eb and ea > sb)  # fmt: skip
    columns = ["i", "rank", "start_ns", "end_ns"]
    con.register(
        "ra", pd.DataFrame([(i, *r) for i, r in enumerate(a)] or [(0, 0, 0, 0)], columns=columns)[: len(a)]
    )
    con.register(
        "rb", pd.DataFrame([(j, *r) for j, r in enumerate(b)] or [(0, 0, 0, 0)], columns=columns)[: len(b)]
    )
    got = con.execute(
        """SELECT x.i, y.i FROM ra AS x JOIN rb AS y
             ON _rank_time(x.rank, x.start_ns) < _rank_time(y.rank, y.end_ns)
            AND _rank_time(x.rank, x.end_ns) > _rank_time(y.rank, y.start_ns)
           ORDER BY ALL"""
    ).fetchall()
    assert got == want
