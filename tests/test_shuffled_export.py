"""Row order is not data: a shuffled export must give the same answers as the original.

Nsight Systems 2025.6 and later write an export's event rows in no particular order, and a
PyTorch profiler's `traceEvents` array holds no promise of order either. Every result is a
function of the events, not of where they sit in the file: an ORDER BY without a tie-breaker, a
window over a non-unique key, `any_value`, `arg_min` with ties or a reader assuming rowid order
would each make a result depend on the storage order. The oracle is the same tool on the same
file: the original export and a copy whose every table holds the same rows in a seeded random
order (same schema, indexes and views) must give identical stored tables, canonical tables and
summary / ranks / diagnose JSON.
"""

from __future__ import annotations

import difflib
import gzip
import itertools
import json
import random
import re
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import TRACES, nsys_traces, requires_shared, rounded_select, stored_tables

NSYS = nsys_traces()
# HTA's trace_filter sample (rank 0, 0.1 MB) and trace_diff's test trace (1.5 MB gzip, 33 MB of
# JSON), whose first GPU event lies 12.9 MB in, past the 4 MiB the probe reads (SNIFF_BYTES), and
# shuffled within them: the probe's process key was that event's pid, so it changed with the order.
KINETO = [
    TRACES / "kineto" / "hta" / "trace_filter" / "sampled_rank-0.json.gz",
    TRACES / "kineto" / "hta" / "trace_diff" / "test" / "test.json.gz",
]
SEEDS = (1,)  # one shuffle per file: seeds 2 to 4 found no other order dependence on these files
COMMANDS = ("summary", "ranks", "diagnose")
# The twelve shared exports take ~40 s on 2 cores (two ingests and three commands each; the two
# Kineto traces ~10 s): all always on. A file whose results still depend on row order, with where the tie is:
KNOWN_ORDER_DEPENDENT: dict[str, str] = {}


def shuffled_export(src: Path, dst: Path, seed: int) -> None:
    """A copy of the SQLite export `src` at `dst` whose every table holds the same rows in an order
    drawn by random.Random(seed) (SQLite's random() cannot be seeded): each table created by its
    own CREATE statement from sqlite_master, filled by one INSERT ... SELECT in the drawn order
    (values copied by SQLite, types and text encodings untouched), then its indexes and views.
    A table whose rowid is an INTEGER PRIMARY KEY (StringIds, the ENUM tables) keeps key order:
    SQLite stores such rows by key whatever order they are inserted in."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(dst)
    try:
        con.execute("ATTACH ? AS src", (f"{src.resolve().as_uri()}?mode=ro&immutable=1",))
        objects = con.execute(
            "SELECT type, name, sql FROM src.sqlite_master "
            "WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
        ).fetchall()
        rng = random.Random(seed)
        con.execute("CREATE TEMP TABLE perm (pos INTEGER PRIMARY KEY, rid INTEGER)")
        for kind, name, sql in objects:
            if kind != "table":
                continue
            con.execute(sql)
            rowids = [r[0] for r in con.execute(f'SELECT rowid FROM src."{name}"')]
            rng.shuffle(rowids)
            con.execute("DELETE FROM perm")
            con.executemany("INSERT INTO perm VALUES (?, ?)", enumerate(rowids))
            con.execute(
                f'INSERT INTO main."{name}" SELECT x.* FROM perm p JOIN src."{name}" x ON x.rowid = p.rid '
                "ORDER BY p.pos"
            )
        for kind, _, sql in objects:
            if kind != "table":
                con.execute(sql)
        con.commit()
    finally:
        con.close()


def shuffled_kineto(src: Path, dst: Path, seed: int) -> None:
    """A copy of a PyTorch-profiler trace with its traceEvents array in a seeded random order. Every
    number keeps its text (a fractional-microsecond timestamp has more digits than a float holds):
    decimals are carried through the JSON round trip as marked strings and put back verbatim."""
    with gzip.open(src, "rt", encoding="utf-8") as fh:
        doc = json.load(fh, parse_float=lambda text: f"{_RAW}{text}{_RAW}")
    random.Random(seed).shuffle(doc["traceEvents"])
    text = re.sub(f'"{_RAW_JSON}([^"]*){_RAW_JSON}"', r"\1", json.dumps(doc))
    dst.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(dst, "wt", encoding="utf-8") as fh:
        fh.write(text)


_RAW = "\x00raw\x00"  # marks a number's text inside a string
_RAW_JSON = re.escape(json.dumps(_RAW)[1:-1])


def _answers(trace: Path) -> dict[str, object]:
    """Everything a user reads of `trace`'s workspace: the stored result tables and the canonical
    tables as sorted sets of rows (floats rounded: conftest.rounded_select), and the JSON (or the
    error line and exit status) of summary, ranks and diagnose with the trace's folder written as
    DIR (each copy and its workspace, ws.duckdb, share a folder of their own)."""
    from nsight_analyze.cli import main
    from nsight_analyze.ingest.run import ingest
    from nsight_analyze.store import schema
    from nsight_analyze.store.workspace import open_workspace

    db = trace.with_name("ws.duckdb")
    ingest([trace], db)
    con = open_workspace(db, read_only=True)
    try:
        out: dict[str, object] = {f"stored {k}": v for k, v in stored_tables(con).items()}
        for table in schema.canonical_tables():
            out[f"canonical {table}"] = sorted(con.execute(rounded_select(con, table)).fetchall(), key=repr)
    finally:
        con.close()
    for command in COMMANDS:
        res = CliRunner().invoke(main, [command, "--db", str(db), "--format", "json"], catch_exceptions=False)
        text = res.output.replace(str(trace.parent), "DIR")
        out[command] = f"exit {res.exit_code}\n{text}"
    return out


def _assert_same(original: dict[str, object], shuffled: dict[str, object]) -> None:
    assert original.keys() == shuffled.keys()
    differ = [k for k in original if original[k] != shuffled[k]]
    first = ""
    if differ and isinstance(original[differ[0]], str):  # a command's output: its first changed lines
        lines = difflib.unified_diff(original[differ[0]].splitlines(), shuffled[differ[0]].splitlines(), n=6)
        first = "\n".join(itertools.islice(lines, 60))
    assert not differ, f"results that depend on the export's row order: {differ}\n{first}"


def _nsys_param(trace: Path):
    name = "__".join(trace.relative_to(TRACES / "nsys").with_suffix("").parts)
    why = KNOWN_ORDER_DEPENDENT.get(name)
    # strict: once the tie is broken the case passes, and the mark must go
    marks = [pytest.mark.xfail(reason=why, raises=AssertionError, strict=True)] if why else []
    return pytest.param(trace, marks=marks, id=name)


@requires_shared
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("trace", [_nsys_param(t) for t in NSYS])
def test_shuffled_nsys_export_gives_identical_results(trace: Path, seed: int, tmp_path: Path):
    """Oracle: the original export through the same tool; the copies share a file name so that
    the workspaces differ only by the rows' storage order."""
    original = tmp_path / "original" / trace.name
    original.parent.mkdir()
    shutil.copy(trace, original)
    shuffled = tmp_path / "shuffled" / trace.name
    shuffled_export(trace, shuffled, seed)
    # the copy holds the same rows in another order (else the test proves nothing)
    with closing(sqlite3.connect(shuffled)) as a:
        a.execute("ATTACH ? AS o", (f"{trace.resolve().as_uri()}?mode=ro&immutable=1",))
        tables = [r[0] for r in a.execute("SELECT name FROM o.sqlite_master WHERE type = 'table'")]
        for table in tables:
            assert (
                a.execute(f'SELECT count(*) FROM "{table}"').fetchone()
                == a.execute(f'SELECT count(*) FROM o."{table}"').fetchone()
            ), table
        if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
            n = a.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
            first = "SELECT start, correlationId FROM {}CUPTI_ACTIVITY_KIND_KERNEL LIMIT 20"
            assert n < 3 or a.execute(first.format("")).fetchall() != a.execute(first.format("o.")).fetchall()
    _assert_same(_answers(original), _answers(shuffled))


@requires_shared
@pytest.mark.parametrize("trace", KINETO, ids=[t.parent.name for t in KINETO])
def test_shuffled_kineto_trace_gives_identical_results(trace: Path, tmp_path: Path):
    """The same for PyTorch-profiler traces: the traceEvents array in a seeded random order.
    Oracle: the original trace through the same tool."""
    original = tmp_path / "original" / trace.name
    original.parent.mkdir()
    shutil.copy(trace, original)
    shuffled = tmp_path / "shuffled" / trace.name
    shuffled_kineto(trace, shuffled, 1)
    _assert_same(_answers(original), _answers(shuffled))


@requires_shared
@pytest.mark.parametrize("moved", ["first", "last"])
def test_process_on_two_gpus_tied_takes_the_lowest_device_in_any_row_order(moved: str, tmp_path: Path):
    """A process whose GPU rows are split evenly over two devices is attributed to the lower device
    id (nsys_meta._read_processes), whatever order the rows are stored in. Hand-made oracle: the
    nsys-ai mock export holds 2 kernels and 1 memcpy of one process, all on device 0; the copy drops
    the memcpy and moves one kernel (the first or the last by start) to device 1, so each device
    has exactly one row."""
    from nsight_analyze.sources import nsys_sqlite

    devices = set()
    for seed in (1, 2, 3, 4):
        path = tmp_path / f"{moved}{seed}.sqlite"
        shuffled_export(TRACES / "nsys" / "nsys-ai" / "mock.sqlite", path, seed)
        with closing(sqlite3.connect(path)) as con:
            con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_MEMCPY")
            pick = "min" if moved == "first" else "max"
            con.execute(
                "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = 1 "
                f"WHERE start = (SELECT {pick}(start) FROM CUPTI_ACTIVITY_KIND_KERNEL)"
            )
            con.commit()
            counts = con.execute(
                "SELECT deviceId, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1 ORDER BY 1"
            ).fetchall()
        assert counts == [(0, 1), (1, 1)]
        probe = nsys_sqlite.probe(path)
        devices |= {p.device_id for p in probe.processes}
        assert any("used 2 GPUs; rank attributed to device 0" in w for w in probe.warnings), probe.warnings
    assert devices == {0}
