"""_interval_buckets / _bucket_of (queries/) against a plain search of the intervals.

Why: the lookup replaces ASOF joins that place every kernel and launch of a rank in its step
window; a wrong bucket (an off-by-one at a bucket edge, the clamp after the last interval, a
point before the first) silently moves work between steps. The reference is the definition
itself: the last interval of the point's rank starting at or before it (ties: the shortest, an
open one longest of all), kept when the point lies before its end.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nsight_analyze.store.duck import sql_rows
from nsight_analyze.store.workspace import open_workspace

OPEN = None  # an interval without an end


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    con = open_workspace(tmp_path_factory.mktemp("ib") / "w.duckdb")
    yield con
    con.close()


def reference(intervals, rank: int, t: int):
    """(start, end) of the interval holding point t of `rank`, or None."""
    owning = [(s, e) for r, s, e in intervals if r == rank and (e is OPEN or e > s) and s <= t]
    if not owning:
        return None
    s, e = max(owning, key=lambda iv: (iv[0], -(float("inf") if iv[1] is OPEN else iv[1])))
    return (s, e) if e is OPEN or t < e else None


def lookup(con, intervals, points):
    con.execute("CREATE OR REPLACE TEMP TABLE iv (rank INTEGER, start_ns BIGINT, end_ns BIGINT)")
    if intervals:
        con.execute(f"INSERT INTO iv VALUES {sql_rows(intervals)}")
    con.execute("CREATE OR REPLACE TEMP TABLE pts (id INTEGER, rank INTEGER, t BIGINT)")
    if points:
        con.execute(f"INSERT INTO pts VALUES {sql_rows([(i, r, t) for i, (r, t) in enumerate(points)])}")
    return con.execute(
        """WITH w AS MATERIALIZED (FROM _interval_buckets('iv')),
              p AS (SELECT p.*, _bucket_of(p.t, g.origin_ns, g.width_ns, g.last_bucket) AS bucket
                    FROM pts AS p
                    LEFT JOIN (SELECT DISTINCT rank, origin_ns, width_ns, last_bucket FROM w) AS g
                        ON g.rank = p.rank)
           SELECT p.id, w.start_ns, w.end_ns
           FROM p LEFT JOIN w ON w.rank = p.rank AND w.bucket = p.bucket
               AND p.t >= w.start_ns AND p.t < w.until_ns
           ORDER BY p.id"""
    ).fetchall()


def check(con, intervals, points) -> None:
    rows = lookup(con, intervals, points)
    assert [r[0] for r in rows] == list(range(len(points)))  # one row per point: never two
    got = [None if s is None else (s, e) for _, s, e in rows]
    assert got == [reference(intervals, r, t) for r, t in points]
    # about five rows per interval (at most 9 n + 1 per rank: width = span // 4n >= span / 8n)
    sizes = con.execute("SELECT rank, count(*) FROM _interval_buckets('iv') GROUP BY rank").fetchall()
    owning = {r: sum(1 for q, s, e in intervals if q == r and (e is OPEN or e > s)) for r, _ in sizes}
    assert all(n <= 9 * owning[r] + 1 for r, n in sizes)


def _interval(t):
    rank, start, length = t
    return (rank, start, OPEN if length == 31 else start + length - 5)  # -5..25: empty ones too


intervals_st = st.lists(
    st.tuples(st.integers(0, 2), st.integers(-50, 50), st.integers(0, 31)).map(_interval), max_size=12
)
points_st = st.lists(st.tuples(st.integers(0, 3), st.integers(-60, 100)), max_size=30)

# The step windows of a rank: back to back, the last ends. Points before, inside, at every edge, after.
WINDOWS = [(0, 10, 20), (0, 20, 35), (0, 35, 36), (0, 36, 100)]
WINDOW_POINTS = [(0, t) for t in (9, 10, 19, 20, 34, 35, 36, 99, 100, 5000)]
# Overlapping and nested intervals, an open one, ties at one start, a gap between intervals
MESSY = [
    (1, 0, 50),
    (1, 10, 20),
    (1, 10, 15),
    (1, 30, OPEN),
    (1, 30, 40),
    (1, 60, 70),
    (2, -40, -30),
    (2, -20, -20),
]
MESSY_POINTS = (
    [(1, t) for t in (-1, 0, 9, 10, 14, 15, 19, 20, 29, 30, 39, 40, 59, 60, 69, 70, 10**12)]
    + [(2, t) for t in (-41, -40, -31, -30, -20, 0)]
    + [(3, 0)]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(intervals=intervals_st, points=points_st)
@example(intervals=WINDOWS, points=WINDOW_POINTS)
@example(intervals=MESSY, points=MESSY_POINTS)
@example(intervals=[], points=[(0, 1)])
def test_lookup_finds_the_interval_its_definition_names(con, intervals, points):
    check(con, intervals, points)


def test_far_apart_intervals_stay_a_few_rows(con):
    """Windows of very different lengths (a 1 ns window beside a day-long one) keep the bucket
    table small: the width follows the span of the starts, not the shortest window."""
    day = 86_400 * 10**9
    windows = [(0, 0, 1), (0, 1, day), (0, day, day + 5), (0, 2 * day, 3 * day)]
    check(
        con,
        windows,
        [(0, t) for t in (0, 1, 2, day - 1, day, day + 4, day + 5, 2 * day, 3 * day - 1, 3 * day)],
    )
    assert con.execute("SELECT count(*) FROM _interval_buckets('iv')").fetchone()[0] <= 9 * 4 + 1
