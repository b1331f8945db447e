"""nsys `gpu-low-util`'s chunk grid (queries/diagnose/_diag_util_grid.sql) against a brute-force reference.

Why: the macro takes a short path for the operations inside one chunk and cuts only those that
cross a chunk boundary; a slip at a boundary, a zero-length operation or one without an end
would silently move busy time between chunks. The reference clips every operation to every
chunk, as nsys 2022.4's rule defines the grid (docs in the query's header).
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nsight_analyze.store.workspace import open_workspace

N_CHUNKS = (1, 3, 30)


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    con = open_workspace(tmp_path_factory.mktemp("grid") / "w.duckdb")
    yield con
    con.close()


def reference(ops: list[tuple[int, int, int, int | None]], n: int) -> set[tuple]:
    """(rank, device, idx, c0, c1, busy) per chunk: every operation clipped to every chunk."""
    out = set()
    for key in sorted({(r, d) for r, d, s, _ in ops if s > 0}):
        mine = [(s, e) for r, d, s, e in ops if (r, d) == key and s > 0]
        ends = [e for _, e in mine if e is not None]
        s0, s1 = min(s for s, _ in mine), max(ends, default=None)
        if s1 is None or s1 <= s0:
            continue
        length = math.ceil((s1 - s0) / n)
        for i in range(n):
            c0, c1 = s0 + i * length, min(s0 + (i + 1) * length, s1)
            if c0 >= s1:
                break
            busy = sum(max(min(e, c1) - max(s, c0), 0) for s, e in mine if e is not None)
            out.add((*key, i, c0, c1, busy))
    return out


op = st.tuples(
    st.integers(0, 1),  # rank
    st.integers(0, 1),  # device
    st.integers(0, 200),  # start (0: not an operation nsys counts)
    st.one_of(st.none(), st.integers(0, 120)),  # length; None: no end
).map(lambda t: (t[0], t[1], t[2], None if t[3] is None else t[2] + t[3]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(op, max_size=25), n=st.sampled_from(N_CHUNKS))
@example(ops=[(0, 0, 1, 11), (0, 0, 11, 11), (0, 0, 5, 31), (0, 0, 31, None)], n=3)  # boundaries
def test_grid_matches_clipping_every_operation(con, ops, n):
    con.execute(
        "CREATE OR REPLACE TEMP TABLE gpu_ops "
        "(rank INTEGER, device_id INTEGER, start_ns BIGINT, end_ns BIGINT)"
    )
    if ops:
        con.executemany("INSERT INTO gpu_ops VALUES (?, ?, ?, ?)", ops)
    got = {
        (r, d, i, c0, c1, int(b))
        for r, d, i, c0, c1, b in con.execute(
            f"SELECT rank, device_id, idx, c0, c1, busy_ns FROM _diag_util_grid({n})"
        ).fetchall()
    }
    assert got == reference(ops, n)
